"""A Server-Sent Events response that notices a client leaving, even while no token is being sent.

Starlette's StreamingResponse only learns of a disconnect when a write fails (under ASGI 2.4, which uvicorn
speaks), and a write happens only when a token is ready: a client that leaves during a long prefill would keep its
sequence computing until then. Here a second task waits for `http.disconnect` and cancels the stream at once;
`on_close` runs however the stream ends, so the sequences are always cancelled and their KV blocks freed.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send


class EventStream(Response):

    def __init__(self, body: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        super().__init__(None)
        # No Content-Length: the body is streamed until it ends (chunked transfer encoding).
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
                            (b"x-accel-buffering", b"no")]
        self.body_iterator = body
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as tasks:
                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tasks.cancel_scope.cancel()

                tasks.start_soon(watch)
                try:
                    await send({"type": "http.response.start", "status": self.status_code,
                                "headers": self.raw_headers})
                    async for chunk in self.body_iterator:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                except OSError:  # the client went away while we wrote
                    pass
                tasks.cancel_scope.cancel()
        finally:
            self.on_close()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
