"""Checks every request passes before any route sees it: the server is not shutting down, the `Host` header names
this server, and the body is not larger than the server accepts.

Host: a web page on another site can make the browser send requests to 127.0.0.1 by rebinding its own name to
that address (DNS rebinding); the browser then treats the answers as same-origin for that page. The request
still carries the page's name in `Host`, so a server that answers only to its own names is safe from it.

Body size: the limit is checked against `Content-Length` before anything is read, and counted while a chunked
body streams in, so an oversized upload costs at most the limit in memory.
"""
from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Iterable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import error_body

DEFAULT_MAX_BODY = 8 << 20
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})


class BodyTooLargeError(HTTPException):
    """Raised from `receive` when a streamed body passes the limit. An HTTPException, so that the route's body
    parsing lets it through to the app's handler (which answers 413) instead of calling it a parsing error."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, too_large_message(limit), headers={"Connection": "close"})


def host_name(value: str) -> tuple[str, int | None] | None:
    """(name, port) of a Host header value, the name lower-cased and IPv6 brackets dropped; None if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        name, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port = rest[1:]
    else:
        name, _, port = value.partition(":")
    if not name:
        return None
    if port:
        if not port.isdigit() or len(port) > 5:
            return None
        return name.rstrip("."), int(port)
    return name.rstrip("."), None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostPolicy:
    """Which `Host` values are this server.

    Bound to a loopback address (the default): the loopback names. Bound to a specific name or address: that one
    and the loopback names. Bound to every interface (0.0.0.0 or ::): any IP address literal (an address cannot
    be rebound; it names this machine or the request would not have arrived) and the machine's own names. In
    every case the names given with --allowed-host are added; `*` allows any. A port, when the header has one,
    must be the server's.
    """

    def __init__(self, bound: str, port: int, allowed: Iterable[str] = ()) -> None:
        self.port = port
        allowed = [a.strip().lower().strip("[]").rstrip(".") for a in allowed]
        self.any = "*" in allowed
        bound = bound.strip("[]").lower()
        self.wildcard = bound in WILDCARDS
        names = set(LOOPBACK_NAMES) | set(allowed)
        if self.wildcard:
            for name in (socket.gethostname(), socket.getfqdn()):
                if name:
                    names.add(name.lower())
        else:
            names.add(bound)
        self.names = frozenset(names)

    def allows(self, header: str | None) -> bool:
        if self.any or header is None:  # HTTP/1.0 clients may leave it out; browsers always send it
            return True
        parsed = host_name(header)
        if parsed is None:
            return False
        name, port = parsed
        if port is not None and port != self.port:
            return False
        return name in self.names or (self.wildcard and _is_ip(name))


class RequestGuard:
    """Refuses requests while draining (503), for another host (403) or with too large a body (413)."""

    def __init__(self, app: ASGIApp, *, hosts: HostPolicy | None, max_body: int, draining) -> None:
        self.app = app
        self.hosts = hosts
        self.max_body = max_body
        self.draining = draining  # a callable: True once the server is shutting down

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        if self.draining():
            return await _refuse(send, 503, "The server is shutting down; retry on another instance or later",
                                 "server_shutting_down", [(b"connection", b"close"), (b"retry-after", b"5")])
        host = headers.get(b"host")
        if self.hosts is not None and not self.hosts.allows(None if host is None else host.decode("latin-1")):
            shown = host.decode("latin-1")[:100] if host is not None else ""
            return await _refuse(send, 403, f"The Host header {shown!r} is not a name of this server (a guard "
                                            "against DNS rebinding); start it with --allowed-host NAME to accept it",
                                 "host_not_allowed")
        length = headers.get(b"content-length")
        if length is not None:
            try:
                declared = int(length) if len(length) <= 20 else None
            except ValueError:
                declared = None
            if declared is None or declared < 0:
                return await _refuse(send, 400, "Content-Length is not a number", "invalid_content_length")
            if declared > self.max_body:
                return await _refuse(send, 413, too_large_message(self.max_body), "request_too_large",
                                     [(b"connection", b"close")])
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise BodyTooLargeError(self.max_body)
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except BodyTooLargeError:
            if started:
                raise
            await _refuse(send, 413, too_large_message(self.max_body), "request_too_large",
                          [(b"connection", b"close")])


def too_large_message(limit: int) -> str:
    return f"The request body is larger than this server accepts ({limit} bytes; its --max-body option sets it)"


async def _refuse(send: Send, status: int, message: str, code: str,
                  extra: list[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(error_body(status, message, code=code)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *extra]})
    await send({"type": "http.response.body", "body": body})
