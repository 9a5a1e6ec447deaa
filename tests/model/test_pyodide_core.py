"""The core's GPU-free parts, written to pass both natively and inside Pyodide.

tests/model/test_pyodide.py runs this file (with test_chat.py) under Node in Pyodide, installed from web/dist as pages
install it; the native run of the suite collects it as usual, so both interpreters answer the same questions:
GGUF parsing and rejection of broken files, the tokenizer against llama.cpp's ids, the sampler, and the KV cache's
block bookkeeping. Only the standard library and pytest are used here: numpy, gguf and tokenizers have no
offline Pyodide build.

`parity_fingerprint` collects results that must be identical on both sides (seeded draws, token ids, a rendered
prompt); the Pyodide run writes it to $LLMCHAT_PARITY_OUT and the native test compares.
"""
from __future__ import annotations

import json
import math
import os
import random
import struct
from pathlib import Path

import pytest

from llmchat.chat.template import ChatTemplate
from llmchat.models import config_from_metadata
from llmchat.errors import ContextOverflowError, GGUFError, LLMChatError, SourceError
from llmchat.gguf.types import BLOCK_LAYOUT, GGMLType
from llmchat.gguf.file import open_gguf
from llmchat.gpu.device import AdapterInfo, Buffer, Device, Kernel, Program
from llmchat.gpu.kvlayout import BLOCK_TOKENS
from llmchat.runtime.kv_cache import KVCache
from llmchat.runtime.sampler import Sampler, SamplingParams
from llmchat.gguf.sources import BytesSource, FileSource
from llmchat.tokenizer.tokenizer import Tokenizer

DATA = Path(__file__).parents[1] / "data"
GOLDEN = json.loads((DATA / "smollm2-135m-instruct-q4_1.json").read_text())
TEXTS = json.loads((DATA / "texts.json").read_text())


@pytest.fixture(scope="module")
def model(smollm2_path):
    with open_gguf(smollm2_path) as gguf:
        yield gguf


@pytest.fixture(scope="module")
def tokenizer(model) -> Tokenizer:
    return Tokenizer.from_metadata(model.metadata)


# -- GGUF ------------------------------------------------------------------------------------------------------------
def test_smollm2_header_describes_the_model(model):
    config = config_from_metadata(model.metadata)
    assert (config.arch, config.n_layer, config.n_embd, config.n_head, config.n_kv_head) == ("llama", 30, 576, 9, 3)
    assert config.vocab_size == 49152 == len(model.metadata["tokenizer.ggml.tokens"])
    assert model.tensors["blk.0.attn_q.weight"].type is GGMLType.Q4_1
    assert model.tensors["token_embd.weight"].shape == (576, 49152)


def test_tensor_index_tiles_the_file_without_overlaps(model, smollm2_path):
    infos = sorted(model.tensors.values(), key=lambda t: t.offset)
    size = os.path.getsize(smollm2_path)
    for a, b in zip(infos, infos[1:]):
        assert a.offset + a.nbytes <= b.offset, (a.name, b.name)
    assert infos[-1].offset + infos[-1].nbytes <= size
    for t in infos:
        elems, nbytes = BLOCK_LAYOUT[t.type]
        assert t.nbytes == t.n_elements // elems * nbytes
        assert t.offset % model.alignment == 0


def test_tensor_bytes_are_read_from_the_right_place(model, smollm2_path):
    info = model.tensors["output_norm.weight"]
    assert info.type is GGMLType.F32
    with open(smollm2_path, "rb") as f:
        f.seek(info.offset)
        raw = f.read(info.nbytes)
    assert bytes(model.tensor_bytes("output_norm.weight")) == raw
    weights = struct.unpack(f"<{info.n_elements}f", raw)
    assert all(math.isfinite(w) for w in weights) and max(map(abs, weights)) > 0


def test_file_source_without_mmap_reads_the_same_bytes(smollm2_path, monkeypatch):
    from llmchat.gguf import sources
    monkeypatch.setattr(sources, "mmap", None)
    with FileSource(smollm2_path) as plain, open_gguf(smollm2_path) as mapped:
        info = mapped.tensors["blk.3.ffn_norm.weight"]
        assert bytes(plain.read(info.offset, info.nbytes)) == bytes(mapped.tensor_bytes(info.name))


@pytest.mark.parametrize("cut", [0, 3, 8, 24, 4096, 1 << 20])
def test_truncated_files_are_refused(smollm2_path, cut):
    with open(smollm2_path, "rb") as f:
        head = f.read(cut)
    with pytest.raises((GGUFError, SourceError)):
        open_gguf(BytesSource(head, "truncated.gguf"))


def test_wrong_magic_and_version_are_refused(smollm2_path):
    with open(smollm2_path, "rb") as f:
        head = bytearray(f.read(2 << 20))
    bad_magic = b"GGML" + head[4:]
    with pytest.raises(GGUFError, match="GGUF"):
        open_gguf(BytesSource(bad_magic, "magic.gguf"))
    bad_version = head[:4] + struct.pack("<I", 99) + head[8:]
    with pytest.raises(GGUFError):
        open_gguf(BytesSource(bad_version, "version.gguf"))


# -- tokenizer ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", GOLDEN["tokenize"], ids=lambda c: repr(c["text"][:20]))
def test_tokenizer_matches_llama_cpp(tokenizer, case):
    assert tokenizer.encode(case["text"]) == case["ids"]


def test_prompts_tokenize_as_llama_cpp_and_decode_back(tokenizer):
    for case in GOLDEN["prompts"]:
        ids = tokenizer.encode(case["text"], add_bos=tokenizer.add_bos, parse_special=True)
        assert ids == case["ids"]
        assert tokenizer.decode(ids) == case["text"]


def test_streaming_decoder_reassembles_multibyte_text(tokenizer):
    text = "naïve café — 東京 🙂 done"
    decoder = tokenizer.stream_decoder()
    pieces = [decoder.feed(t) for t in tokenizer.encode(text)]
    assert "".join(pieces) + decoder.flush() == text


# -- sampler -----------------------------------------------------------------------------------------------------------
def _row(seed: int, vocab: int = 512) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(0.0, 3.0) for _ in range(vocab)]


def test_greedy_takes_the_lowest_id_among_maxima():
    row = [0.0] * 64
    row[17] = row[40] = 5.0
    assert Sampler(SamplingParams(), 64).sample_full(row, [])[0] == 17


def test_a_seed_replays_the_same_tokens():
    params = SamplingParams(temperature=0.9, top_k=40, top_p=0.95, seed=7)
    draws = [[Sampler(params, 512).sample_full(_row(i), [])[0] for i in range(30)] for _ in range(2)]
    assert draws[0] == draws[1]
    assert len(set(draws[0])) > 1


def test_candidates_and_full_row_pick_the_same_token():
    params = SamplingParams(temperature=0.8, top_k=20, seed=3)
    full, cand = Sampler(params, 512), Sampler(params, 512)
    for i in range(20):
        row = _row(100 + i)
        ranked = sorted(range(len(row)), key=lambda t: (-row[t], t))[:20]
        top = max(row)
        sum_exp = sum(math.exp(v - top) for v in row)
        got = cand.sample_candidates(ranked, [row[t] for t in ranked], top, sum_exp, [])
        want = full.sample_full(row, [])
        assert got[0] == want[0]
        assert got[1] == pytest.approx(want[1], abs=1e-9)


def test_repetition_penalty_steers_away_from_history():
    row = [0.0] * 8
    row[2], row[5] = 2.0, 1.9
    params = SamplingParams(repetition_penalty=1.5)
    assert Sampler(params, 8).sample_full(row, [2])[0] == 5


def test_invalid_parameters_are_refused():
    with pytest.raises(LLMChatError):
        SamplingParams(temperature=-1).validate()


# -- KV cache bookkeeping ------------------------------------------------------------------------------------------
class MemoryDevice(Device):
    """Buffers in host memory: enough for the cache's bookkeeping, which never runs a kernel."""

    def __init__(self, max_binding_size: int = 1 << 30):
        self.info = AdapterInfo(name="memory", backend="memory", software=True, max_binding_size=max_binding_size)

    def buffer(self, size, label, *, uniform=False, readable=False):
        return Buffer(size=size, label=label, handle=bytearray(size), uniform=uniform)

    def write(self, buffer, data, offset=0):
        data = bytes(data)
        buffer.handle[offset:offset + len(data)] = data

    def read(self, buffer, offset=0, size=None):
        size = buffer.size - offset if size is None else size
        return bytes(buffer.handle[offset:offset + size])

    def kernel(self, name, source, constants=None) -> Kernel:
        raise NotImplementedError

    def program(self, dispatches) -> Program:
        raise NotImplementedError

    def run(self, program) -> None:
        raise NotImplementedError


def _kv_widths(model) -> list[int]:
    config = config_from_metadata(model.metadata)
    return [config.kv_dim] * config.n_layer


@pytest.fixture
def kv(model) -> KVCache:
    return KVCache(MemoryDevice(), _kv_widths(model), n_slots=3, context=64)


def _table(kv: KVCache, slot: int, n: int) -> list[int]:
    kv.sync()
    raw = kv.device.read(kv.table, slot * kv.max_blocks * 4, n * 4)
    return list(struct.unpack(f"<{n}I", raw))


def test_reserve_hands_out_blocks_and_uploads_the_table(kv):
    a, b = kv.new_slot(), kv.new_slot()
    kv.reserve(a, BLOCK_TOKENS + 1)
    kv.reserve(b, 1)
    assert kv.free_blocks == kv.n_blocks - 3
    blocks_a, blocks_b = _table(kv, a, 2), _table(kv, b, 1)
    assert len(set(blocks_a + blocks_b)) == 3


def test_fork_shares_full_blocks_and_truncate_keeps_shared_ones(kv):
    parent = kv.new_slot()
    kv.reserve(parent, 2 * BLOCK_TOKENS + 5)
    child = kv.fork(parent, 2 * BLOCK_TOKENS + 5)
    assert _table(kv, child, 2) == _table(kv, parent, 2)
    used = kv.n_blocks - kv.free_blocks
    assert used == 3
    # Cutting the child inside a shared block must not let it write into the parent's cache.
    assert kv.truncate(child, BLOCK_TOKENS + 3) == BLOCK_TOKENS
    kv.free_slot(parent)
    assert kv.n_blocks - kv.free_blocks == 1  # the child still holds the first block


def test_context_and_capacity_limits_are_errors(kv):
    slot = kv.new_slot()
    with pytest.raises(ContextOverflowError):
        kv.reserve(slot, 65)
    kv.new_slot(), kv.new_slot()
    with pytest.raises(LLMChatError, match="slots"):
        kv.new_slot()


def test_a_cache_beyond_the_binding_limit_is_refused_up_front(model):
    small = MemoryDevice(max_binding_size=1 << 20)
    with pytest.raises(LLMChatError, match="binding limit"):
        KVCache(small, _kv_widths(model), n_slots=1, context=4096)


# -- parity ----------------------------------------------------------------------------------------------------------
def parity_fingerprint(model_path: str | os.PathLike) -> dict:
    """Results that must not depend on the interpreter: seeded draws, token ids, a rendered chat prompt."""
    with open_gguf(model_path) as gguf:
        tokenizer = Tokenizer.from_metadata(gguf.metadata)
        template = ChatTemplate.from_metadata(gguf.metadata)
    params = SamplingParams(temperature=0.7, top_k=30, top_p=0.9, min_p=0.02, seed=2024)
    sampler = Sampler(params, 512)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour <b>now</b>."}]
    prompt = template.render(messages, add_generation_prompt=True)
    return {
        "draws": [sampler.sample_full(_row(i), [])[0] for i in range(40)],
        "ids": [tokenizer.encode(text) for text in TEXTS["tokenize"]],
        "prompt": prompt,
        "prompt_ids": tokenizer.encode(prompt, parse_special=True),
    }


def test_parity_fingerprint(smollm2_path):
    fingerprint = parity_fingerprint(smollm2_path)
    assert len(fingerprint["draws"]) == 40 and fingerprint["prompt"].startswith("<|im_start|>system")
    out = os.environ.get("LLMCHAT_PARITY_OUT")
    if out:
        Path(out).write_text(json.dumps(fingerprint))
