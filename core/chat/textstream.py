"""Generated token ids to streamed text, ending at the first stop string.

Text is released as soon as it can no longer turn out to be the start of a stop string: with stop "\\n\\nUser:",
a trailing "\\n" is held back until the next token shows whether the stop follows. A stop string found in the text
ends the stream there; the stop string itself is not part of the output (OpenAI's behaviour).
"""
from __future__ import annotations

from collections.abc import Sequence

from ..tokenizer.tokenizer import Tokenizer


class TextStream:
    def __init__(self, tokenizer: Tokenizer, stops: Sequence[str] = ()) -> None:
        self._decoder = tokenizer.stream_decoder()
        self._stops = [s for s in stops if s]
        self._pending = ""
        self.stopped = False  # a stop string was found; nothing more comes out

    def push(self, token: int) -> str:
        """Decode one more token and return the text that is now safe to show (possibly empty)."""
        if self.stopped:
            return ""
        self._pending += self._decoder.feed(token)
        hit = self._first_stop()
        if hit is not None:
            self.stopped = True
            out, self._pending = self._pending[:hit], ""
            return out
        safe = len(self._pending) - self._held_back()
        out, self._pending = self._pending[:safe], self._pending[safe:]
        return out

    def close(self) -> str:
        """The end of generation: whatever was held back, plus an incomplete UTF-8 character as U+FFFD."""
        if self.stopped:
            return ""
        self._pending += self._decoder.flush()
        out, self._pending = self._pending, ""
        return out

    def _first_stop(self) -> int | None:
        hits = [i for i in (self._pending.find(s) for s in self._stops) if i >= 0]
        return min(hits) if hits else None

    def _held_back(self) -> int:
        """How many trailing characters could still begin a stop string."""
        held = 0
        for s in self._stops:
            for k in range(min(len(s) - 1, len(self._pending)), held, -1):
                if self._pending.endswith(s[:k]):
                    held = k
                    break
        return held
