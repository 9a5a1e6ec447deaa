"""`llmchat serve`: an OpenAI-compatible HTTP server with continuous batching and prefix caching.

    app.py           routes; completions.py request handling (llmchat.protocol reads the fields and shapes
                     the answers); schemas.py request bodies for validation and the OpenAPI schema
    static.py        web demo and model files with Range; sse.py streaming

The scheduler, prefix cache and metrics it serves with are llmchat.serving's (no web framework there).

Needs FastAPI and uvicorn (installed with llmchat natively; the core itself imports without them).
"""
from .app import ServerOptions, create_app
from .completions import ModelInfo
from .runner import ServeConfig, model_info, serve
from ..runtime.generation import GenerationRequest
from ..serving.scheduler import Scheduler

__all__ = ["GenerationRequest", "ModelInfo", "Scheduler", "ServeConfig", "ServerOptions", "create_app",
           "model_info", "serve"]
