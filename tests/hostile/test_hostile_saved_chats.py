"""Saved conversations are not trusted: a file that is damaged (cut, flipped bits, NaN with a matching checksum),
hostile (sizes past its capacity, a header that never ends), another model's or layout's, or not a file at all is
refused with ChatCacheError, and the conversation held before stays as it was and answers as a fresh one would."""
from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from chat_turns import FIRST, follow_up, reply
from gpu_util import adapter_gpu  # noqa: F401 (a fixture)
from model_factory import oracle_params, write_model

from llmchat.api import LLM
from llmchat.gpu.kvlayout import BLOCK_TOKENS
from llmchat.runtime import chat_cache
from llmchat.runtime.chat_cache import HEADER_BYTES, ChatCacheError


# A model of plain attention, and the families whose sequences carry a state beside their KV cache (convolution
# and recurrent layers), so the state's own checksum is exercised too.
FAMILIES = {"llama": dict(n_layer=2, n_embd=64, n_head=4, n_kv_head=2, seed=3),
            "lfm2": oracle_params("lfm2"), "qwen35": oracle_params("qwen35")}


@pytest.mark.parametrize("family", FAMILIES)
def test_files_that_do_not_fit_are_refused_and_the_conversation_kept(family, adapter_gpu, tmp_path):  # noqa: F811
    path = write_model(tmp_path / "m.gguf", **FAMILIES[family])
    other = write_model(tmp_path / "other.gguf", n_layer=3, n_embd=64, n_head=4, n_kv_head=2, seed=3)
    llm = LLM(str(path), context=256, device=adapter_gpu.device)
    stateful = llm.runtime.engine.kv.stateful
    assert stateful == (family != "llama")
    # One token: its text reads back as the same token, so a state (which cannot be cut back) is found whole.
    answer, _ = reply(llm, FIRST, max_tokens=1 if stateful else 6)
    good = tmp_path / "good.kv"
    llm.save_chat(good, identity="etag-1")
    data = good.read_bytes()
    held = list(llm.conversation.tokens)

    def damaged(name: str, content: bytes) -> Path:
        (tmp_path / name).write_bytes(content)
        return tmp_path / name

    def header(**change) -> bytes:
        (length,) = struct.unpack_from("<I", data, 8)
        fields = {**json.loads(data[12:12 + length]), **change}
        text = json.dumps(fields).encode()
        return (data[:8] + struct.pack("<I", len(text)) + text).ljust(HEADER_BYTES, b"\0") + data[HEADER_BYTES:]

    with chat_cache.LocalFile(good, writable=False) as file:
        layout = chat_cache.read_layout(file)

    def flipped(offset: int) -> bytes:
        return data[:offset] + bytes([data[offset] ^ 0x10]) + data[offset + 1:]

    def not_finite() -> bytes:
        # NaN in the first block, with the block's checksum made to match (as a hostile file would).
        nan = np.array([np.nan], dtype=np.float16 if layout.dtype == "f16" else np.float32).tobytes()
        block = bytearray(data[layout.blocks_at:layout.blocks_at + layout.block_bytes])
        block[:len(nan)] = nan
        ids = data[HEADER_BYTES:HEADER_BYTES + 4 * min(layout.n, BLOCK_TOKENS)]
        check = struct.pack("<I", zlib.crc32(bytes(block), zlib.crc32(ids)))
        out = bytearray(data)
        out[layout.blocks_at:layout.blocks_at + layout.block_bytes] = block
        out[layout.checks_at:layout.checks_at + 4] = check
        return bytes(out)

    cases = {
        "empty": (damaged("empty.kv", b""), "empty"),
        "not ours": (damaged("text.kv", b"GGUF" + bytes(5000)), "magic"),
        "cut short": (damaged("short.kv", data[:len(data) - 100]), "cut short"),
        "header garbage": (damaged("garbage.kv", data[:12] + b"{not json" + data[21:]), "damaged"),
        "header too long": (damaged("long.kv", data[:8] + struct.pack("<I", 10 ** 6) + data[12:]), "damaged"),
        "n past capacity": (damaged("n.kv", header(n=10 ** 6)), "damaged"),
        "negative size": (damaged("neg.kv", header(block_bytes=-4)), "damaged"),
        "another identity": (good, "another model"),
        "earlier layout": (damaged("v1.kv", b"LLMCKV01" + data[8:]), "earlier llmchat"),
        "a flipped bit in a block": (damaged("bit.kv", flipped(layout.blocks_at + 3)), "block 0 of .* checksum"),
        "a flipped token id": (damaged("id.kv", flipped(HEADER_BYTES + 4 * 2)), "block 0 of .* checksum"),
        "NaN in a block": (damaged("nan.kv", not_finite()), "not finite"),
        **({"a flipped bit in the state": (damaged("state.kv", flipped(layout.state_at + 3)),
                                           "its state does not match its checksum")} if stateful else {}),
        "a directory": (tmp_path, "cannot restore a conversation from"),
        "a missing file": (tmp_path / "none.kv", "cannot restore a conversation from"),
    }
    assert bool(layout.state_bytes) == stateful
    for name, (file, words) in cases.items():
        with pytest.raises(ChatCacheError, match=words):
            llm.restore_chat(file, identity="etag-2" if name == "another identity" else "etag-1")
        assert llm.conversation.tokens == held, name
    with pytest.raises(ChatCacheError, match="cache of"):  # another model: here, blocks of another size
        LLM(str(other), context=256, device=adapter_gpu.device).restore_chat(good, identity="etag-1")
    with pytest.raises(ChatCacheError, match="f16 cache|f32 cache"):
        other_type = "f32" if llm.runtime.engine.kv.dtype == "f16" else "f16"
        if other_type == "f16" and not adapter_gpu.device.info.f16:
            pytest.skip("the adapter has no shader-f16 for a cache of the other type")
        LLM(str(path), context=256, device=adapter_gpu.device, kv_type=other_type).restore_chat(good, identity="etag-1")
    with pytest.raises(ChatCacheError, match="over this context"):
        LLM(str(path), context=16, device=adapter_gpu.device).restore_chat(good, identity="etag-1")
    # The kept conversation still answers as a fresh one would, from its cache.
    messages = follow_up(llm, answer, "and then?")
    tokens, usage = reply(llm, messages)
    assert usage["cached_tokens"] == len(held)
    assert tokens == reply(LLM(str(path), context=256, device=adapter_gpu.device), messages)[0]
