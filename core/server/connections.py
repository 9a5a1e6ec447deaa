"""How the server treats connections beyond what uvicorn does by itself: a deadline for a request's headers, and
a shutdown that lets running requests finish for a while before ending them.

Headers: uvicorn's keep-alive timeout starts only after a response, so a client that connects and then sends
nothing, or its headers a byte at a time, would hold its connection (and a file descriptor) for ever. The
protocol below closes a connection whose next request's headers are not complete within `header_timeout`.

Shutdown (SIGTERM, or Ctrl-C): the listening socket closes at once and every new request on a connection still
open is refused with 503 (the app's `draining` flag). Requests in flight get `grace` seconds; then the scheduler
stops, which ends each of them: a stream with an `error` event and `[DONE]`, a non-streaming request with 503.
A second Ctrl-C quits at once. Either way the process then exits 0: being stopped is how a server ends.

The port is tried before the model loads (`check_port`), so a port already taken is said at once rather than after
a load that may take minutes.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import socket
import threading
from collections.abc import Callable
from types import FrameType

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..errors import LLMChatError

log = logging.getLogger("llmchat.server")
FLUSH_MARGIN_S = 5.0  # after the scheduler stops, how long uvicorn waits for the ended responses to go out


def check_port(host: str, port: int, *, option: str = "--port") -> None:
    """Refuse, before a model is loaded, an address uvicorn could not listen on: bound once with uvicorn's own
    options and let go. LLMChatError naming `option`, which changes it. (The socket is not handed on to uvicorn:
    served from a socket bound here, an answer sent before the request's body was read, a 413, reached a third of
    its clients as a reset connection.)"""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT does not count
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise LLMChatError(f"port {port} on {host} is in use by another program (another llmchat serve?): "
                                   f"choose another with {option}") from None
            raise LLMChatError(f"cannot listen on {host} port {port}: {exc.strerror or exc} ({option})") from None


def header_timeout_protocol(header_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline on each request's headers."""

    class Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def _between_requests(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(header_timeout, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._between_requests():
                self._arm()  # the first bytes of a request (uvicorn's keep-alive timer stops here)
            super().data_received(data)
            if not self._between_requests():
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()  # keep-alive's own timer now covers the idle time
            self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if self._between_requests() and not self.transport.is_closing():
                log.info("closing a connection whose request headers took over %.0f s", header_timeout)
                self.transport.close()

    return Protocol


class GracefulServer(uvicorn.Server):
    """uvicorn's server with the shutdown described above. `on_drain` runs at the first signal (it sets the app's
    flag), `end_running` once the grace period is over (it stops the scheduler)."""

    def __init__(self, config: uvicorn.Config, *, grace: float, on_drain: Callable[[], None],
                 end_running: Callable[[], None]) -> None:
        super().__init__(config)
        self.grace = grace
        self.on_drain = on_drain
        self.end_running = end_running
        self._timer: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._timer is None:
            self.on_drain()
            log.warning("shutting down: running requests have %.0f s to finish", self.grace)
            self._timer = threading.Timer(self.grace, self._grace_over)
            self._timer.daemon = True
            self._timer.start()
        super().handle_exit(sig, frame)
        # uvicorn raises the signal again once it has shut down, so the process would end by KeyboardInterrupt
        # (status 130, which `make demo` reports as "Error 130") or be killed by SIGTERM. A shutdown that was asked
        # for and completed is the server's normal end: serve returns and the process exits 0.
        self._captured_signals.clear()

    def _grace_over(self) -> None:
        log.warning("shutdown grace period over: ending the requests still running")
        self.end_running()
