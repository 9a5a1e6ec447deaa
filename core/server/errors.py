"""Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}` with the matching HTTP status.

Clients built for OpenAI (the official SDKs among them) read `error.message` and map the status to an exception
class (400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 429 RateLimitError), so both matter.
"""
from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from starlette.responses import JSONResponse

from ..errors import LLMChatError

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
          413: "invalid_request_error", 416: "invalid_request_error", 422: "invalid_request_error",
          429: "rate_limit_error", 503: "server_error"}


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """The body of every error response (documented in the OpenAPI schema)."""

    error: ErrorDetail


class APIError(Exception):
    """Raised by route code; turned into an OpenAI-shaped JSON response by the app's handler."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    @classmethod
    def of(cls, exc: LLMChatError, *, param: str | None = None) -> APIError:
        """The answer to one of llmchat's errors, as its class says (status, OpenAI code, field, headers);
        `param` names the field where the error does not."""
        return cls(exc.status, str(exc), param=exc.param or param, code=exc.api_code, headers=exc.http_headers())

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, param=self.param, code=self.code)

    def response(self) -> JSONResponse:
        return json_response(self.body(), self.status, self.headers)


class _ASCIIJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: an error message may quote the client's text, and text with a
    lone surrogate (valid in JSON, not in UTF-8) would make the usual rendering fail."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def json_response(body: dict[str, Any], status: int, headers: dict[str, str] | None = None) -> JSONResponse:
    return _ASCIIJSONResponse(body, status_code=status, headers=headers)


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "Malformed JSON, invalid or unsupported fields, context overflow"},
    401: {"model": ErrorResponse, "description": "Missing or wrong API key (when the server has one)"},
    403: {"model": ErrorResponse, "description": "The Host header names another server (see --allowed-host)"},
    404: {"model": ErrorResponse, "description": "Unknown model"},
    413: {"model": ErrorResponse, "description": "The request body is larger than the server's --max-body"},
    429: {"model": ErrorResponse, "description": "Queue full; retry after the Retry-After header's seconds"},
    503: {"model": ErrorResponse, "description": "The generation scheduler is not running"},
}


GENERATION_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The completion: JSON, or with `stream` a Server-Sent Events stream of chunks ending "
                         "with `data: [DONE]`",
          "content": {"application/json": {}, "text/event-stream": {"schema": {
              "type": "object", "required": ["data"],
              "properties": {"data": {"type": "string", "description": "a JSON chunk, or [DONE] at the end"}}}}}},
    **ERROR_RESPONSES,
}
