"""llmchat: GGUF models on WebGPU, natively through wgpu-py and in the browser through Pyodide.

    from llmchat import load
    llm = load("smollm2")
"""
from .errors import LLMChatError
from .version import __version__

__all__ = ["LLM", "LLMChatError", "load", "plan", "PROFILES", "__version__"]


def __getattr__(name: str):
    # The engine is imported on first use so that `import llmchat` (and the CLI's light commands) stay fast.
    if name in ("load", "LLM", "plan"):
        from . import api
        return getattr(api, name)
    if name == "PROFILES":
        from .gpu.profiles import PROFILES
        return PROFILES
    raise AttributeError(f"module 'llmchat' has no attribute {name!r}")
