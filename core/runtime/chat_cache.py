"""A conversation's KV cache kept in a file, so that a later session continues it without computing it again.

Rebuilding a conversation of n tokens means a prefill of n tokens; restoring it is one read of its K and V rows
from storage and one upload. On a CPU-emulated adapter, where prefill runs at tens of tokens a second, that is the
difference between seconds and a blink (`LLM.save_chat` / `LLM.restore_chat`; the browser keeps one file per
`prompt_cache_key` in OPFS).

Layout of the file (little-endian), at fixed offsets so that a later save writes only what changed:

    0              magic b"LLMCKV02"
    8              u32 length of the JSON header, then the header: {model, dtype, block_bytes, state_bytes,
                   capacity, n}, padded to HEADER_BYTES
    HEADER_BYTES   capacity u32 token ids; the first n are the positions held
    then           ceil(capacity / BLOCK_TOKENS) + 1 u32 CRC-32s: one per block (over its token ids and its bytes),
                   then one over the state
    then           state_bytes of per-sequence state (recurrent and convolution layers; none for plain attention)
    then           ceil(n / BLOCK_TOKENS) blocks of block_bytes: each every layer's K then V rows for its positions
                   (KVCache.read_blocks)

`model` is a fingerprint of what the values depend on: the model's tensors (names, types, shapes, offsets), the
cache's widths and element type, and an identity of the file's bytes the caller may add (a download's ETag or
sha256). A file made by another model, cache type or llmchat layout is refused, never half-used.

A save first writes the header with n cut to the positions that stay valid, then the new token ids, blocks and
state, then the header with the new n: a save cut short leaves a file that holds a shorter prefix, or nothing,
but never positions that disagree with their tokens.

A file is read back only whole and sound: every block's and the state's checksum must match (a flipped bit in
storage, a half-synced copy) and every value must be finite (the model's arithmetic never stores NaN or
infinity), so that a damaged file is refused with ChatCacheError instead of steering the next turn.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
from array import array
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Protocol

from ..errors import LLMChatError
from ..gpu.kvlayout import BLOCK_TOKENS, blocks_for
from .kv_cache import KVCache, common_prefix

MAGIC = b"LLMCKV02"
EARLIER_MAGICS = (b"LLMCKV01",)
HEADER_BYTES = 4096


class ChatCacheError(LLMChatError):
    """A saved conversation cache that cannot be used here (another model, a damaged file); nothing was changed."""

    code = "chat-cache"


class ChatFile(Protocol):
    """Random access to the bytes of one file (a local file, or an OPFS sync access handle in the browser)."""

    def size(self) -> int: ...
    def read(self, offset: int, size: int) -> bytes: ...
    def write(self, offset: int, data: bytes) -> None: ...
    def truncate(self, size: int) -> None: ...


class LocalFile:
    """A ChatFile over a file on disk, created when missing (`writable`)."""

    def __init__(self, path: str | os.PathLike, writable: bool) -> None:
        self.path = Path(path)
        try:
            self._f = open(self.path, "r+b" if self.path.exists() or not writable else "w+b")
        except OSError as e:
            what = "save the conversation in" if writable else "restore a conversation from"
            raise ChatCacheError(f"cannot {what} {self.path}: {e.strerror or e}") from None

    def size(self) -> int:
        return os.fstat(self._f.fileno()).st_size

    def read(self, offset: int, size: int) -> bytes:
        self._f.seek(offset)
        return self._f.read(size)

    def write(self, offset: int, data: bytes) -> None:
        self._f.seek(offset)
        self._f.write(data)
        self._f.flush()

    def truncate(self, size: int) -> None:
        self._f.truncate(size)

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> LocalFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def fingerprint(gguf, kv: KVCache, identity: str = "") -> str:
    """What a saved cache's values depend on, as a hex digest (see the module's docstring)."""
    tensors = [(t.name, int(t.type), list(t.shape), t.offset, t.shard) for t in gguf.tensors.values()]
    facts = [gguf.metadata.get("general.architecture"), tensors, kv.dtype, kv.block_bytes, kv.slot_state_bytes,
             BLOCK_TOKENS, identity]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()


@dataclass(frozen=True)
class Layout:
    """Where the parts of a file stand."""

    model: str
    dtype: str
    block_bytes: int
    state_bytes: int
    capacity: int
    n: int = 0

    @property
    def checks_at(self) -> int:
        return HEADER_BYTES + 4 * self.capacity

    @property
    def state_at(self) -> int:
        return self.checks_at + 4 * (blocks_for(self.capacity) + 1)

    @property
    def blocks_at(self) -> int:
        return self.state_at + self.state_bytes

    def end(self, n: int) -> int:
        return self.blocks_at + blocks_for(n) * self.block_bytes

    def header(self, n: int) -> bytes:
        text = json.dumps({**asdict(self), "n": n}).encode()
        return (MAGIC + struct.pack("<I", len(text)) + text).ljust(HEADER_BYTES, b"\0")


def _expected(kv: KVCache, model: str, capacity: int) -> Layout:
    return Layout(model, kv.dtype, kv.block_bytes, kv.slot_state_bytes, capacity)


def read_layout(file: ChatFile) -> Layout:
    """The file's header; ChatCacheError saying why when it is not one of ours, or damaged."""
    size = file.size()
    if size == 0:
        raise ChatCacheError("the file is empty (no conversation was saved in it)")
    head = file.read(0, HEADER_BYTES)
    if head[:8] in EARLIER_MAGICS:
        raise ChatCacheError("the file was saved by an earlier llmchat, in a layout this one does not read (the "
                             "next save writes it anew)")
    if len(head) < 12 or head[:8] != MAGIC:
        raise ChatCacheError("the file is not a saved conversation cache (wrong magic bytes)")
    (length,) = struct.unpack_from("<I", head, 8)
    try:
        if 12 + length > HEADER_BYTES:
            raise ValueError(f"a header of {length} bytes")
        given = json.loads(head[12:12 + length])
        layout = Layout(**{f.name: given[f.name] for f in fields(Layout)})
        sizes = (layout.block_bytes, layout.state_bytes, layout.capacity, layout.n)
        if not all(isinstance(v, int) and v >= 0 for v in sizes) or layout.n > layout.capacity:
            raise ValueError("sizes out of range")
    except (ValueError, KeyError, TypeError) as e:
        raise ChatCacheError(f"the saved conversation cache's header is damaged ({e})") from None
    if size < layout.end(layout.n):
        raise ChatCacheError(f"the saved conversation cache is cut short ({size} bytes, "
                             f"{layout.end(layout.n)} expected for {layout.n} positions)")
    return layout


def _tokens(file: ChatFile, n: int) -> list[int]:
    data = file.read(HEADER_BYTES, 4 * n)
    tokens = array("I")
    tokens.frombytes(data[:len(data) - len(data) % 4])
    if len(tokens) != n:
        raise ChatCacheError(f"the saved conversation cache is cut short ({len(tokens)} of {n} token ids)")
    return tokens.tolist()


def _refusal(layout: Layout, want: Layout) -> str | None:
    if (layout.dtype, layout.block_bytes, layout.state_bytes) != (want.dtype, want.block_bytes, want.state_bytes):
        return (f"it holds a {layout.dtype} cache of {layout.block_bytes} bytes a block, this one is {want.dtype} "
                f"of {want.block_bytes}")
    if layout.model != want.model:
        return "it was saved for another model (or another llmchat layout of its cache)"
    return None


@dataclass(frozen=True)
class Saved:
    """What a save did: `tokens` positions are held by the file, `written` of them were written now."""

    tokens: int
    written: int
    nbytes: int


def save(kv: KVCache, slot: int | None, tokens: list[int], file: ChatFile, model: str) -> Saved:
    """Make `file` hold the first len(tokens) positions of `slot` (tokens: the ids computed there), writing only
    the blocks past what the file already holds of the same tokens. No slot, or no tokens: the file holds none."""
    n = len(tokens) if slot is not None else 0
    if n and kv.stateful and kv.state_position(slot) != n:
        raise LLMChatError(f"slot {slot}'s state stands at {kv.state_position(slot)}, not at its {n} tokens")
    try:
        layout = read_layout(file)
        if _refusal(layout, _expected(kv, model, layout.capacity)) or layout.capacity < n:
            raise ChatCacheError("another layout: written anew")
        common = common_prefix(_tokens(file, layout.n), tokens[:n])
        valid = 0 if layout.state_bytes else common  # the state is rewritten below: it stands for no earlier position
        if valid != layout.n:
            file.write(0, layout.header(valid))
        stale = max(0, layout.n - n)  # ids an edit cut away: cleared, as the blocks that held them are dropped
    except ChatCacheError:
        layout, common, stale = _expected(kv, model, max(n, kv.max_context)), 0, 0
        file.write(0, layout.header(0))
    stale_checks = blocks_for(n + stale) - blocks_for(n)
    first = common // BLOCK_TOKENS
    file.write(HEADER_BYTES + 4 * common, array("I", tokens[common:n]).tobytes() + bytes(4 * stale))
    state = kv.read_state(slot) if layout.state_bytes and n else b""
    if state:
        file.write(layout.state_at, state)
    blocks = kv.read_blocks(slot, first, blocks_for(n)) if n else b""
    file.write(layout.blocks_at + first * layout.block_bytes, blocks)
    checks = _block_checks(tokens[:n], blocks, layout.block_bytes, first)
    file.write(layout.checks_at + 4 * first, array("I", checks).tobytes() + bytes(4 * stale_checks))
    file.write(layout.checks_at + 4 * blocks_for(layout.capacity), struct.pack("<I", zlib.crc32(state)))
    file.truncate(layout.end(n))
    file.write(0, layout.header(n))
    return Saved(n, n - first * BLOCK_TOKENS if n else 0, layout.end(n))


@dataclass(frozen=True)
class Conversation:
    """A saved conversation read back: its token ids, its blocks and its state (KVCache.read_blocks' form)."""

    tokens: list[int]
    blocks: bytes
    state: bytes


def read(kv: KVCache, file: ChatFile, model: str) -> Conversation:
    """The conversation `file` holds, checked against `kv` and `model` (the fingerprint); ChatCacheError saying
    why when it cannot be used here. Changes nothing."""
    layout = read_layout(file)
    why = _refusal(layout, _expected(kv, model, layout.capacity))
    if why:
        raise ChatCacheError(f"the saved conversation cache does not fit this model: {why}")
    n = layout.n
    if n > kv.max_context:
        raise ChatCacheError(f"the saved conversation holds {n} positions, over this context of {kv.max_context}")
    if not n:
        return Conversation([], b"", b"")
    tokens = _tokens(file, n)
    blocks = file.read(layout.blocks_at, blocks_for(n) * layout.block_bytes)
    state = file.read(layout.state_at, layout.state_bytes)
    if len(blocks) != blocks_for(n) * layout.block_bytes or len(state) != layout.state_bytes:
        raise ChatCacheError("the saved conversation cache is cut short")
    checks = array("I")
    checks.frombytes(file.read(layout.checks_at, 4 * blocks_for(n)))
    bad = [i for i, (want, got) in enumerate(zip(checks, _block_checks(tokens, blocks, layout.block_bytes)))
           if want != got]
    if len(checks) != blocks_for(n) or bad:
        raise ChatCacheError(f"the saved conversation cache is damaged: block {bad[0] if bad else len(checks)} of "
                             f"{blocks_for(n)} does not match its checksum")
    (state_check,) = struct.unpack("<I", file.read(layout.checks_at + 4 * blocks_for(layout.capacity), 4))
    if state_check != zlib.crc32(state):
        raise ChatCacheError("the saved conversation cache is damaged: its state does not match its checksum")
    for name, data, dtype in (("K and V rows", blocks, layout.dtype), ("state", state, "f32")):
        bad = _not_finite(data, dtype)
        if bad:
            raise ChatCacheError(f"the saved conversation cache holds {bad} values in its {name} that are not "
                                 "finite numbers")
    return Conversation(tokens, blocks, state)


# A little-endian float is NaN or infinite when its exponent bits are all ones: in f16 bits 2-6 of the high byte, in
# f32 bits 0-6 of the high byte and bit 7 of the next. Tables that mark those bytes let bytes.translate find them
# at C speed, without numpy (which the browser runtime does not load).
_F16_HIGH = bytes(int(b & 0x7C == 0x7C) for b in range(256))
_F32_HIGH = bytes(int(b & 0x7F == 0x7F) for b in range(256))
_F32_NEXT = bytes(int(b & 0x80 == 0x80) for b in range(256))


def _not_finite(data: bytes, dtype: str) -> int:
    """How many of the f16 or f32 values in `data` are NaN or infinite."""
    if dtype == "f16":
        return data[1::2].translate(_F16_HIGH).count(1)
    high = int.from_bytes(data[3::4].translate(_F32_HIGH), "little")
    return (high & int.from_bytes(data[2::4].translate(_F32_NEXT), "little")).bit_count()


def _block_checks(tokens: list[int], blocks: bytes, block_bytes: int, first: int = 0) -> list[int]:
    """The CRC-32 of each block from `first` on, over its positions' token ids and its bytes."""
    view = memoryview(blocks)
    return [zlib.crc32(view[j * block_bytes:(j + 1) * block_bytes],
                       zlib.crc32(array("I", tokens[b * BLOCK_TOKENS:(b + 1) * BLOCK_TOKENS]).tobytes()))
            for j, b in enumerate(range(first, first + len(blocks) // block_bytes))]


def place(kv: KVCache, conversation: Conversation) -> int | None:
    """A new slot of `kv` holding `conversation`'s positions (None when it holds none)."""
    n = len(conversation.tokens)
    if not n:
        return None
    slot = kv.new_slot()
    try:
        kv.reserve(slot, n)
        kv.write_blocks(slot, 0, conversation.blocks)
        if conversation.state:
            kv.write_state(slot, conversation.state, n)
    except LLMChatError:
        kv.free_slot(slot)
        raise
    return slot
