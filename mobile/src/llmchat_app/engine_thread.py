"""The engine's own thread. Every GPU call (opening the adapter, loading a model, generating) runs on one worker
thread, so the UI thread never waits for the GPU; results come back to the UI through `post`, which schedules a
callable on the UI's event loop (`loop.call_soon_threadsafe` in the app, a plain call in tests that have no loop).
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

import llmchat

from .platform import PHONES, device_kind, load_options

Post = Callable[..., None]  # post(fn, *args): run fn(*args) on the UI thread


@dataclass(frozen=True)
class ChatSettings:
    temperature: float = 0.0
    max_tokens: int = 256
    seed: int | None = None


class EngineThread:
    def __init__(self, post: Post, kind: str | None = None):
        self.post = post
        self.kind = kind or device_kind()
        self.llm = None
        self.model_path: str | None = None
        self._device = None
        self._jobs: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="llmchat-engine", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], object], on_done: Callable[[object], None] | None = None,
               on_error: Callable[[BaseException], None] | None = None) -> None:
        self._jobs.put((job, on_done, on_error))

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=30)

    def _work(self) -> None:
        while (item := self._jobs.get()) is not None:
            job, on_done, on_error = item
            try:
                result = job()
            except Exception as e:  # handed to the UI, which shows it; the thread lives on for the next job
                if on_error is not None:
                    self.post(on_error, e)
                continue
            if on_done is not None:
                self.post(on_done, result)

    # -- jobs (run on the engine thread) ------------------------------------------------------------------------
    def device(self):
        """The adapter this app runs on, opened once. On phones each load opens its own under the phone profile,
        so this one only describes the hardware."""
        if self.llm is not None:
            return self.llm.device
        if self._device is None:
            from llmchat.gpu import open_device
            self._device = open_device()
        return self._device

    def load(self, path: str):
        if self.model_path == path and self.llm is not None:
            return self.llm
        self.llm = None  # the old model's buffers go before the new one's are allocated
        if self.kind in PHONES:
            self._device = None
            self.llm = llmchat.load(path, **load_options(self.kind))
        else:
            self.llm = llmchat.load(path, device=self.device())
        self.model_path = path
        return self.llm

    def unload(self) -> None:
        self.llm, self.model_path = None, None

    # -- generation ---------------------------------------------------------------------------------------------
    def chat(self, messages: list[dict], settings: ChatSettings, *, model_path: str, on_token: Callable[[str, int | None], None],
             on_finish: Callable[[str, dict], None], on_error: Callable[[BaseException], None]) -> threading.Event:
        """Stream a reply to `messages` from the model at `model_path` (loaded first when it is not the current
        one); returns the event that stops it (the reply then finishes as "stopped")."""
        stop = threading.Event()

        def run():
            self.load(model_path)
            stream = self.llm.chat(messages, max_tokens=settings.max_tokens, temperature=settings.temperature,
                                   seed=settings.seed)
            try:
                for event in stream:
                    if stop.is_set():
                        self.post(on_finish, "stopped", {})
                        return
                    if event.finish_reason is not None:
                        if event.text:
                            self.post(on_token, event.text, None)
                        self.post(on_finish, event.finish_reason, {**event.usage, **event.timings})
                        return
                    self.post(on_token, event.text, event.token)
            finally:
                stream.close()

        self.submit(run, on_error=on_error)
        return stop

    def reset_chat(self) -> None:
        self.submit(lambda: self.llm.reset_chat() if self.llm is not None else None)
