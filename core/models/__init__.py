"""One file per architecture family; `build_model` picks the file from `general.architecture`."""
from __future__ import annotations

from ..config import LLAMA_FAMILY, ModelConfig
from ..errors import UnsupportedModelError


def model_class(config: ModelConfig):
    if config.arch in LLAMA_FAMILY:
        from .llama import Llama
        return Llama
    raise UnsupportedModelError(f"architecture '{config.arch}' is not supported (supported: {', '.join(LLAMA_FAMILY)})")
