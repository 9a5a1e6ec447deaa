"""The FastAPI application: OpenAI-compatible routes, health and metrics, the web demo and model files.

    POST /v1/chat/completions, /v1/completions   generation (JSON or SSE)
    GET  /v1/models, /v1/models/{id}             the one served model
    GET  /health, /metrics                       liveness; Prometheus text
    GET  /models/{name}                          model files (the served one, and the llmchat model cache), Range
    GET  /dist/{path}                            the browser runtime (web/dist, or LLMCHAT_WEB_DIST)
    GET  /pages/{path}                           the page author's own pages (`--pages DIR`, e.g. examples/)
    GET  /server.json                            what the chat page needs to know of this server: its API, its model
    GET  /, /{path}                              the web demo (the package's web/ folder)

The app never touches the GPU: generation goes through the Scheduler's thread, so handlers stay responsive while a
step runs.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse, PlainTextResponse, Response

from ..version import __version__
from ..errors import LLMChatError
from .completions import Answer, ModelInfo, Prepared, Run, generation_error, prepare_chat, prepare_text
from .errors import ERROR_RESPONSES, GENERATION_RESPONSES, APIError, error_body, json_response
from .guard import DEFAULT_MAX_BODY, BodyTooLargeError, HostPolicy, RequestGuard
from .middleware import APIKeyMiddleware, RequestMetricsMiddleware
from ..serving.scheduler import Scheduler
from .schemas import ChatCompletionRequest, CompletionRequest
from .sse import EventStream
from .static import FileResponse, folder_page, safe_path

DISCONNECT_POLL_S = 0.5  # how often a non-streaming request checks whether its client is still there
log = logging.getLogger("llmchat.server")


def default_web_dir() -> Path:
    from .. import web

    return Path(web.__file__).parent


def runtime_missing(dist_dir: Path) -> bool:
    """Whether the browser runtime (Pyodide, the wheels, their lock file) is absent from `dist_dir`."""
    return not (dist_dir / "manifest.json").is_file() or not (dist_dir / "pyodide" / "pyodide-lock.json").is_file()


@dataclass
class ServerOptions:
    api_key: str | None = None
    cors_origins: Sequence[str] = ()
    web_dir: Path = field(default_factory=default_web_dir)
    models_dir: Path | None = None  # the llmchat model cache (catalogue.models_dir()); None serves none of it
    model_file: Path | None = None  # the served model's own file, listed under its file name
    api_key_all: bool = False  # the key guards every route, not only /v1
    hosts: HostPolicy | None = None  # the Host header values answered; None answers any (in-process tests)
    max_body: int = DEFAULT_MAX_BODY
    dist_dir: Path | None = None  # the browser runtime; None: web_dir/dist
    pages_dir: Path | None = None  # served at /pages/ (pages that load /llm-chat.js); None serves none

    @property
    def runtime_dir(self) -> Path:
        return self.dist_dir if self.dist_dir is not None else self.web_dir / "dist"


def create_app(scheduler: Scheduler, model: ModelInfo, options: ServerOptions | None = None) -> FastAPI:
    options = options or ServerOptions()
    # The schema lives under /v1 and the interactive docs are off (they load their scripts from a CDN), so that
    # every other path belongs to the web folder.
    app = FastAPI(title="llmchat", version=__version__, openapi_url="/v1/openapi.json", docs_url=None,
                  redoc_url=None, description="OpenAI-compatible API over an on-device GGUF runtime.")
    app.state.draining = False  # set when a shutdown begins: new requests are refused from then on
    _add_error_handlers(app)
    _add_api_routes(app, scheduler, model)
    _add_page_info(app, model, options)
    _add_file_routes(app, options)
    # Added innermost first: CORS sees every response (401s included) and answers preflights before the key check;
    # the guard's refusals (shutting down, foreign Host, body too large) are counted and come before the key.
    if options.api_key:
        app.add_middleware(APIKeyMiddleware, api_key=options.api_key, everywhere=options.api_key_all)
    app.add_middleware(RequestGuard, hosts=options.hosts, max_body=options.max_body,
                       draining=lambda: app.state.draining)
    app.add_middleware(RequestMetricsMiddleware, metrics=scheduler.metrics)
    if options.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(options.cors_origins),
                           allow_methods=["GET", "HEAD", "POST", "OPTIONS"], allow_headers=["*"],
                           expose_headers=["Content-Range", "Content-Length", "Accept-Ranges", "ETag",
                                           "Retry-After"], max_age=600)
    return app


# -- routes ------------------------------------------------------------------------------------------------------


def _add_api_routes(app: FastAPI, scheduler: Scheduler, model: ModelInfo) -> None:
    created = int(time.time())
    model_card = {"id": model.id, "object": "model", "created": created, "owned_by": "llmchat",
                  "max_model_len": model.context}

    @app.post("/v1/chat/completions", responses=GENERATION_RESPONSES)
    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
        return await _respond(await prepare_chat(body, model), request)

    @app.post("/v1/completions", responses=GENERATION_RESPONSES)
    async def completions(body: CompletionRequest, request: Request) -> Response:
        return await _respond(await prepare_text(body, model), request)

    async def _respond(prepared: Prepared, request: Request) -> Response:
        run = Run(scheduler, prepared)
        answer = Answer(prepared, model)
        if prepared.request.stream:
            return EventStream(answer.stream(run), on_close=run.cancel)
        try:
            checked = time.monotonic()
            while not run.done:
                item = await run.next(timeout=DISCONNECT_POLL_S)
                if item is not None:
                    answer.take(*item)
                if time.monotonic() - checked >= DISCONNECT_POLL_S:  # tokens may come faster than the timeout
                    checked = time.monotonic()
                    if await request.is_disconnected():
                        run.cancel()
                        return Response(status_code=499)  # nobody reads it; nginx's code for "client closed"
        except LLMChatError as exc:  # the scheduler stopped, or the generation failed
            raise generation_error(exc, prepared.request) from None
        finally:
            run.cancel()  # a no-op for finished sequences; frees the rest if this handler is cancelled
        return JSONResponse(answer.response())

    @app.get("/v1/models", responses=ERROR_RESPONSES)
    async def list_models() -> dict:
        return {"object": "list", "data": [model_card]}

    @app.get("/v1/models/{model_id:path}", responses=ERROR_RESPONSES)
    async def get_model(model_id: str) -> dict:
        if model_id not in model.aliases:
            raise APIError(404, f"The model `{model_id}` does not exist; this server runs `{model.id}`",
                           param="model", code="model_not_found")
        return model_card

    @app.get("/health")
    async def health() -> JSONResponse:
        if not scheduler.alive:
            reason = repr(scheduler.failure) if scheduler.failure else "the scheduler is not running"
            return JSONResponse({"status": "error", "detail": reason}, status_code=503)
        return JSONResponse({"status": "ok", "model": model.id, "engine": model.engine})

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(scheduler.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


def _add_page_info(app: FastAPI, model: ModelInfo, options: ServerOptions) -> None:
    # The chat page (web/index.html) asks for this: a page served by llmchat then loads the served model's file,
    # calls it by its name, and answers through this server's API where the browser cannot run the model. A page
    # from anywhere else finds no such file and stands alone.
    info = {"api": "/v1", "api_key": bool(options.api_key),  # the page has no key to send
            "model": {"id": model.id, "name": model.title or model.id, "context": model.context,
                      "file": f"/models/{quote(options.model_file.name)}" if options.model_file else None}}

    @app.get("/server.json", include_in_schema=False)
    async def page_info() -> JSONResponse:
        return JSONResponse(info, headers={"Cache-Control": "no-cache"})


def _add_file_routes(app: FastAPI, options: ServerOptions) -> None:
    def not_found(what: str) -> APIError:
        return APIError(404, f"{what} not found", code="not_found")

    @app.api_route("/models/{name:path}", methods=["GET", "HEAD"], include_in_schema=False)
    async def model_file(name: str, request: Request) -> Response:
        path = None
        if options.model_file is not None and name == options.model_file.name:
            path = options.model_file
        elif options.models_dir is not None:
            path = safe_path(options.models_dir, name)
        if path is None or not path.is_file():
            raise not_found(f"model file {name!r}")
        return FileResponse(path, request.headers, request.method)

    @app.api_route("/{name:path}", methods=["GET", "HEAD"], include_in_schema=False)
    async def web_file(name: str, request: Request) -> Response:
        if name.startswith("v1/"):
            # This route matched because nothing under /v1 answers GET: a POST route is then 405, not 404.
            allowed = sorted({m for r in app.routes if getattr(r, "path", None) == "/" + name
                              for m in getattr(r, "methods", None) or ()})
            if allowed:
                raise APIError(405, f"Method {request.method} is not allowed on /{name}; use {', '.join(allowed)}",
                               code="method_not_allowed", headers={"Allow": ", ".join(allowed)})
            raise not_found("route")
        root, url = options.web_dir, name
        if name.startswith("dist/"):
            root, name = options.runtime_dir, name[len("dist/"):]
        elif name.startswith("pages/") and options.pages_dir is not None:
            root, name = options.pages_dir, name[len("pages/"):]
        path = safe_path(root, name)
        if path is None:  # a folder (or the root): its index page
            path = safe_path(root, (name.rstrip("/") + "/index.html").lstrip("/"))
        if path is None and root is options.pages_dir and url.endswith("/"):
            # The user's own pages (an examples/ folder, say) need not have an index: they get a list of links.
            listing = folder_page(root, name, "/" + url)
            if listing is not None:
                return Response(listing, media_type="text/html; charset=utf-8")
        if path is None or "__pycache__" in path.parts or path.name == "__init__.py":
            raise not_found(f"{'/' + name!r}")
        return FileResponse(path, request.headers, request.method)


# -- errors ------------------------------------------------------------------------------------------------------


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def api_error(request: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(LLMChatError)
    async def refused(request: Request, exc: LLMChatError) -> JSONResponse:
        return APIError.of(exc).response()  # its class says how to answer (llmchat.errors)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_error(exc).response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "request_too_large" if isinstance(exc, BodyTooLargeError) else None
        return json_response(error_body(exc.status_code, str(exc.detail), code=code), exc.status_code,
                             getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette re-raises after this answer, so uvicorn logs the traceback; the client gets JSON, not text.
        log.error("unexpected %s on %s %s", type(exc).__name__, request.method, request.url.path)
        return json_response(error_body(500, "The server had an error while processing your request "
                                             f"({type(exc).__name__}); its log has the details"), 500)


def _validation_error(exc: RequestValidationError) -> APIError:
    """One 400 naming the first field at fault (OpenAI answers 400, not FastAPI's 422, for bad fields)."""
    errors = exc.errors()
    if not errors:
        return APIError(400, "invalid request")
    first = errors[0]
    if first.get("type") == "json_invalid":
        return APIError(400, "The request body is not valid JSON: " + str(first.get("ctx", {}).get("error", "")),
                        code="invalid_json")
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    # Unions report every alternative; the field path up to the first type name is what the client wrote.
    path = []
    for p in loc:
        if not (p.isidentifier() or p.isdigit()) or p in {"str", "int", "list", "float", "bool"}:
            break
        path.append(p)
    param = ".".join(path) or None
    if first.get("type") == "missing":
        message = f"`{param}` is required"
    elif first.get("type") == "extra_forbidden":
        message = f"`{param}` is not a field this API knows (misspelt?)"
    else:
        message = f"`{param}`: {first.get('msg')}" if param else str(first.get("msg"))
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return APIError(400, message + more, param=param, code="invalid_value")
