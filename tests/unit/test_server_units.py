"""Server parts that need no GPU: byte ranges, path checks, stop strings, the prefix cache's bookkeeping, metrics
text and the refusal of unsupported fields."""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from llmchat.gguf.file import open_gguf
from llmchat.gpu.kvlayout import BLOCK_TOKENS
from llmchat.runtime.kv_cache import KVCache
from llmchat.runtime.metrics import Metrics
from llmchat.runtime.prefix_cache import PrefixCache, common_prefix
from llmchat.protocol import RANGES
from llmchat.server.schemas import ChatCompletionRequest, CompletionRequest, unsupported_fields
from llmchat.server.static import media_type, parse_ranges, safe_path
from llmchat.chat.textstream import TextStream
from llmchat.tokenizer.tokenizer import Tokenizer
from model_factory import write_model

# -- Range headers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("header,size,expected", [
    ("bytes=0-3", 100, [(0, 3)]),
    ("bytes=10-", 100, [(10, 99)]),
    ("bytes=-10", 100, [(90, 99)]),
    ("bytes=-1000", 100, [(0, 99)]),  # a suffix longer than the file is the whole file
    ("bytes=90-1000", 100, [(90, 99)]),  # the last byte is clamped to the file
    ("bytes=0-1, 5-6", 100, [(0, 1), (5, 6)]),
    ("bytes=100-", 100, []),  # starts past the end: unsatisfiable
    ("bytes=200-300", 100, []),
    ("bytes=-0", 100, []),
    ("bytes=0-0", 0, []),  # nothing is satisfiable in an empty file
    ("bytes=200-300, 0-0", 100, [(0, 0)]),  # satisfiable if any part is
    ("bytes=5-2", 100, None),  # malformed headers are ignored: the whole file is sent
    ("bytes=-", 100, None),
    ("bytes=a-b", 100, None),
    ("bytes=1-²", 100, None),  # Unicode digits are not digits in HTTP
    ("items=0-3", 100, None),
    ("bytes=", 100, None),
    ("bytes=" + ",".join(["0-0"] * 17), 100, None),  # too many parts
])
def test_parse_ranges(header, size, expected):
    assert parse_ranges(header, size) == expected


# -- paths -------------------------------------------------------------------------------------------------------


def test_safe_path_stays_inside_its_root(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "sub" / "b.wasm").write_bytes(b"\0asm")
    (root / ".secret").write_text("s")
    (tmp_path / "outside.txt").write_text("o")
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    assert safe_path(root, "a.txt") == (root / "a.txt").resolve()
    assert safe_path(root, "sub/b.wasm") == (root / "sub" / "b.wasm").resolve()
    for bad in ["../outside.txt", "sub/../../outside.txt", "/etc/passwd", ".secret", "sub/..", "link.txt",
                "a.txt\x00", "sub\\b.wasm", "", "sub", "missing.txt", "./a.txt"]:
        assert safe_path(root, bad) is None, bad


@pytest.mark.parametrize("name,expected", [
    ("x.wasm", "application/wasm"), ("x.mjs", "text/javascript; charset=utf-8"),
    ("x.whl", "application/zip"), ("x.json", "application/json"),
    ("x.webmanifest", "application/manifest+json"), ("x.gguf", "application/octet-stream"),
    ("X.HTML", "text/html; charset=utf-8"), ("noext", "application/octet-stream"),
])
def test_media_types(tmp_path, name, expected):
    assert media_type(tmp_path / name) == expected


# -- stop strings ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = write_model(tmp_path_factory.mktemp("tiny") / "tiny.gguf")
    with open_gguf(str(path)) as g:
        return Tokenizer.from_metadata(g.metadata)


def _run(stream: TextStream, tokenizer: Tokenizer, text: str) -> list[str]:
    return [stream.push(t) for t in tokenizer.encode(text)]


def test_text_stream_holds_back_a_possible_stop(tokenizer):
    stream = TextStream(tokenizer, ["END"])
    pieces = _run(stream, tokenizer, "abc EN")
    assert "".join(pieces) == "abc " and not stream.stopped  # "EN" may still become "END"
    assert stream.close() == "EN"


def test_text_stream_cuts_at_the_first_stop(tokenizer):
    stream = TextStream(tokenizer, ["zz", "c d"])
    pieces = _run(stream, tokenizer, "abc def zz")
    assert "".join(pieces) == "ab" and stream.stopped
    assert stream.push(tokenizer.encode("x")[0]) == "" and stream.close() == ""


def test_text_stream_without_stops_and_split_characters(tokenizer):
    stream = TextStream(tokenizer)
    ids = tokenizer.encode("é!")  # two byte tokens for é: nothing comes out until the character is whole
    assert len(ids) == 3
    assert [stream.push(t) for t in ids] == ["", "é", "!"]
    stream = TextStream(tokenizer)
    assert stream.push(ids[0]) == "" and stream.close() == "\ufffd"


# -- prefix cache ------------------------------------------------------------------------------------------------


class _Device:
    """Enough of a Device for KVCache's bookkeeping: buffers are placeholders, writes are dropped."""

    info = SimpleNamespace(max_binding_size=1 << 30, f16=False, name="a bookkeeping stub")

    def buffer(self, size, label, uniform=False):
        return SimpleNamespace(size=size, label=label)

    def write(self, buffer, data):
        pass


def _kv(n_slots: int = 4, n_blocks: int | None = None) -> KVCache:
    return KVCache(_Device(), [8], n_slots=n_slots, context=128, n_blocks=n_blocks)


def _filled(kv: KVCache, tokens: list[int]) -> int:
    slot = kv.new_slot()
    kv.reserve(slot, len(tokens))
    return slot


def test_common_prefix():
    a = list(range(100))
    assert common_prefix(a, a) == 100
    assert common_prefix(a, a[:37]) == 37
    assert common_prefix(a, a[:50] + [-1] + a[51:]) == 50
    assert common_prefix([], a) == 0


def test_lease_shares_whole_blocks_of_the_longest_prefix():
    kv = _kv()
    cache = PrefixCache(kv, max_entries=2)
    system = list(range(1000, 1040))  # 40 tokens: two whole blocks and a part
    slot = _filled(kv, system + [1, 2, 3])
    cache.insert(slot, system + [1, 2, 3])
    free = kv.free_blocks
    lease = cache.lease(system + [7, 8, 9])
    assert lease.cached == 2 * BLOCK_TOKENS and cache.hit_tokens == 32
    assert kv._blocks[lease.slot] == kv._blocks[slot][:2] and kv.free_blocks == free  # shared, nothing copied
    assert cache.lease([5] * 40).cached == 0  # nothing in common


def test_lease_leaves_one_token_to_compute():
    kv = _kv()
    cache = PrefixCache(kv, max_entries=2)
    tokens = list(range(32))
    cache.insert(_filled(kv, tokens), tokens)
    assert cache.lease(tokens).cached == BLOCK_TOKENS  # 31 positions could be reused; whole blocks of them: 16


def test_lease_shares_a_running_sequence():
    kv = _kv()
    cache = PrefixCache(kv, max_entries=2)
    running = list(range(50))
    slot = _filled(kv, running)
    lease = cache.lease(running[:40] + [0], live=[(slot, running)])
    assert lease.cached == 32 and kv._blocks[lease.slot] == kv._blocks[slot][:2]


def test_insert_keeps_one_entry_per_prefix_and_evicts_lru():
    kv = _kv(n_slots=6)
    cache = PrefixCache(kv, max_entries=2)
    base = list(range(48))
    cache.insert(_filled(kv, base[:20]), base[:20])
    cache.insert(_filled(kv, base), base)  # covers the first: it is dropped
    assert len(cache) == 1
    cache.insert(_filled(kv, base[:33]), base[:33])  # covered by the longer one: freed at once
    assert len(cache) == 1
    cache.insert(_filled(kv, [7] * 8), [7] * 8)  # under one block: nothing to share, freed
    assert len(cache) == 1
    cache.insert(_filled(kv, [1] * 20), [1] * 20)
    cache.insert(_filled(kv, [2] * 20), [2] * 20)  # a third distinct prefix: the least recently used goes
    assert len(cache) == 2 and cache.lease(base + [0]).cached == 0
    cache.clear()
    assert len(cache) == 0 and kv.free_slots == 5  # the lease above still holds one slot


def test_block_pressure_evicts_entries():
    kv = _kv(n_slots=4, n_blocks=6)
    cache = PrefixCache(kv, max_entries=3)
    for t in (1, 2, 3):
        cache.insert(_filled(kv, [t] * 32), [t] * 32)
    assert kv.free_blocks == 0
    assert cache.make_block_room(3) and kv.free_blocks >= 3 and len(cache) < 3
    assert not cache.make_block_room(7)  # more than the cache could ever free


def test_kv_blocks_needed():
    kv = _kv()
    slot = kv.new_slot()
    assert kv.blocks_needed(slot, 1) == 1 and kv.blocks_needed(slot, 33) == 3
    kv.reserve(slot, 20)
    assert kv.blocks_needed(slot, 20) == 0 and kv.blocks_needed(slot, 33) == 1


# -- metrics, schemas --------------------------------------------------------------------------------------------


def test_metrics_text_format():
    m = Metrics()
    m.requests.inc(1, "/v1/completions", "200")
    m.requests.inc(2, '/we"ird', "404")
    m.ttft.observe(0.3)
    m.ttft.observe(100)
    m.gauge("llmchat_queue_depth", "Waiting.", lambda: 3)
    text = m.render()
    assert 'llmchat_requests_total{route="/v1/completions",code="200"} 1' in text
    assert 'llmchat_requests_total{route="/we\\"ird",code="404"} 2' in text
    assert 'llmchat_time_to_first_token_seconds_bucket{le="0.25"} 0' in text
    assert 'llmchat_time_to_first_token_seconds_bucket{le="0.5"} 1' in text
    assert 'llmchat_time_to_first_token_seconds_bucket{le="+Inf"} 2' in text
    assert "llmchat_time_to_first_token_seconds_count 2" in text
    assert "# TYPE llmchat_queue_depth gauge\nllmchat_queue_depth 3" in text


def test_unsupported_fields_are_named_harmless_values_pass():
    base = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    assert unsupported_fields(ChatCompletionRequest(**base)) == []
    assert unsupported_fields(ChatCompletionRequest(**base, response_format={"type": "text"}, store=False,
                                                    logit_bias={}, tools=[])) == []
    assert unsupported_fields(ChatCompletionRequest(**base, tools=[{"type": "function"}],
                                                    response_format={"type": "json_object"})) == []
    assert unsupported_fields(ChatCompletionRequest(**base, functions=[{"name": "f"}], audio={"voice": "x"})) == \
        ["audio", "functions"]
    assert unsupported_fields(CompletionRequest(model="m", prompt="x", echo=True, suffix="s")) == ["echo", "suffix"]


def test_the_schema_publishes_the_protocols_ranges():
    properties = ChatCompletionRequest.model_json_schema()["properties"]
    for name in ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "n", "top_logprobs"):
        bounds = RANGES[name]
        numbers = next((p for p in properties[name].get("anyOf", [properties[name]]) if "minimum" in p))
        assert (numbers["minimum"], numbers.get("maximum")) == (bounds.low, bounds.high), name
