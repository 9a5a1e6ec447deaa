"""`llmchat serve`: an OpenAI-compatible HTTP server with continuous batching and prefix caching.

    app.py           routes; completions.py request handling; schemas.py request bodies
    static.py        web demo and model files with Range; sse.py streaming
Batching (llmchat.runtime.scheduler), the prefix cache (llmchat.runtime.prefix_cache) and the Prometheus metrics
they count (llmchat.runtime.metrics) are not HTTP and live in llmchat.runtime.

Needs FastAPI and uvicorn (installed with llmchat natively; the core itself imports without them).
"""
from .app import ServerOptions, create_app
from .completions import ModelInfo
from .runner import ServeConfig, model_info, serve
from ..runtime.generation import GenerationRequest
from ..runtime.scheduler import Scheduler

__all__ = ["GenerationRequest", "ModelInfo", "Scheduler", "ServeConfig", "ServerOptions", "create_app",
           "model_info", "serve"]
