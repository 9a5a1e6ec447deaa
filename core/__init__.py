"""llmchat: GGUF models on WebGPU, natively through wgpu-py and in the browser through Pyodide."""
from .errors import LLMChatError

__version__ = "0.1.0"
__all__ = ["LLMChatError", "__version__"]
