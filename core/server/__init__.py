"""`llmchat serve`: an OpenAI-compatible HTTP server with continuous batching and prefix caching.

    scheduler.py     continuous batching around llmchat.runtime.generation's loop, chunked prefill, cancellation
    prefix_cache.py  finished sequences' KV kept and shared by later prompts
    app.py           routes; completions.py request handling (llmchat.protocol reads the fields and shapes
                     the answers); schemas.py request bodies for validation and the OpenAPI schema
    static.py        web demo and model files with Range; sse.py streaming (metrics: llmchat.runtime.metrics)

Needs FastAPI and uvicorn (installed with llmchat natively; the core itself imports without them).
"""
from .app import ServerOptions, create_app
from .completions import ModelInfo
from .runner import ServeConfig, model_info, serve
from ..runtime.generation import GenerationRequest
from ..runtime.scheduler import Scheduler

__all__ = ["GenerationRequest", "ModelInfo", "Scheduler", "ServeConfig", "ServerOptions", "create_app",
           "model_info", "serve"]
