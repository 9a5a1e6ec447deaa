"""Two plain ASGI middlewares: the API key check and request counting.

They are written against ASGI directly rather than with Starlette's BaseHTTPMiddleware, which wraps the response
in a way that delays streaming and hides the client's disconnect from the route.
"""
from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import error_body
from ..serving.metrics import Metrics

API_PREFIX = "/v1/"


class APIKeyMiddleware:
    """Requires `Authorization: Bearer KEY` (the scheme in any case) on the API routes (/v1/...), or on every route
    when `everywhere` is set. By default the web demo, the model files, /health and /metrics stay open: the
    browser runtime loads the page and the model without a key, and monitoring needs none."""

    def __init__(self, app: ASGIApp, api_key: str, everywhere: bool = False) -> None:
        self.app = app
        self.expected = api_key.encode()
        self.everywhere = everywhere

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        guarded = self.everywhere or scope["path"].startswith(API_PREFIX)
        if scope["type"] != "http" or not guarded or scope["method"] == "OPTIONS":
            return await self.app(scope, receive, send)
        given = dict(scope["headers"]).get(b"authorization")
        scheme, _, token = (given or b"").strip().partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.expected):
            return await self.app(scope, receive, send)
        if given is None:
            message = "Missing API key: send it as `Authorization: Bearer KEY`"
        else:
            message = "Incorrect API key provided"
        body = json.dumps(error_body(401, message, code="invalid_api_key")).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="llmchat"')]})
        await send({"type": "http.response.body", "body": body})


class RequestMetricsMiddleware:
    """Counts responses by route and status code. Routes are grouped so that URLs chosen by clients (file names)
    cannot grow the number of label values without bound."""

    ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics")

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    def route(self, path: str) -> str:
        if path in self.ROUTES:
            return path
        if path.startswith("/v1/models/"):
            return "/v1/models"
        if path.startswith("/models/"):
            return "/models"
        if path.startswith(API_PREFIX):
            return "/v1/other"
        return "/static"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status = 500  # if the app fails before answering

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            self.metrics.requests.inc(1, self.route(scope["path"]), str(status))
