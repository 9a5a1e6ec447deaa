"""A conversation's KV cache, kept from one turn to the next: each turn's prompt repeats the history, so only what
follows the part already in the cache is computed. It can be saved to a file and restored later, in another process
(llmchat.runtime.chat_cache)."""
from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import contextmanager

from . import chat_cache
from .kv_cache import KVCache, common_prefix


class ChatSession:
    """The slot holding one conversation and the tokens whose positions it holds (`tokens`)."""

    def __init__(self, kv: KVCache, gguf) -> None:
        self._kv = kv
        self._gguf = gguf  # the model file, which a saved conversation names
        self.slot: int | None = None
        self.tokens: list[int] = []

    def resume(self, ids: Sequence[int]) -> tuple[int, int]:
        """The slot in which to compute the prompt `ids`, and how many of its first positions the slot already
        holds: what the last turn left that `ids` repeats, less what a shared block or a model's state cannot keep
        (KVCache.truncate). At least one token is left to compute, since its step yields the first logits."""
        if self.slot is None:
            self.slot, self.tokens = self._kv.new_slot(), []
        common = self._kv.truncate(self.slot, common_prefix(self.tokens, ids[:-1]))
        self.tokens = list(ids[:common])
        return self.slot, common

    def keep(self, tokens: Sequence[int]) -> None:
        """The turn ended with `tokens` computed in the slot (the prompt and the reply fed so far)."""
        self.tokens = list(tokens)

    def reset(self) -> None:
        """Forget the conversation and free its blocks."""
        if self.slot is not None:
            self._kv.free_slot(self.slot)
        self.slot, self.tokens = None, []

    def save(self, file: str | os.PathLike | chat_cache.ChatFile, identity: str = "") -> chat_cache.Saved:
        """Keep the conversation in `file` (a path, or a `chat_cache.ChatFile`); saving again to the same file
        writes only the positions added since (or changed by an edit). `identity` names the model file's bytes (a
        checksum, an ETag) when the file could change under the same tensor layout."""
        with _opened(file, writable=True) as f:
            model = chat_cache.fingerprint(self._gguf, self._kv, identity)
            return chat_cache.save(self._kv, self.slot, self.tokens, f, model)

    def restore(self, file: str | os.PathLike | chat_cache.ChatFile, identity: str = "") -> int:
        """Make the conversation saved by `save` this one; returns the positions restored. The file is checked
        before anything is replaced: `chat_cache.ChatCacheError` keeps the current conversation."""
        with _opened(file, writable=False) as f:
            model = chat_cache.fingerprint(self._gguf, self._kv, identity)
            saved = chat_cache.read(self._kv, f, model)
        self.reset()
        self.slot = chat_cache.place(self._kv, saved)
        self.tokens = saved.tokens if self.slot is not None else []
        return len(self.tokens)


@contextmanager
def _opened(file, writable: bool):
    if isinstance(file, (str, os.PathLike)):
        with chat_cache.LocalFile(file, writable) as f:
            yield f
    else:
        yield file
