"""One file per architecture family, each registering its model class under its `general.architecture` names.

Adding an architecture means adding its file (and its tests): every module of this package is imported on first
lookup, so nothing else lists the families.
"""
from __future__ import annotations

import importlib
import pkgutil

from ..gguf.config import Metadata, ModelConfig
from ..errors import UnsupportedModelError

_REGISTRY: dict[str, type] = {}
_NOT_MODELS = {"base", "layers", "weights"}


def register(*architectures: str):
    """Class decorator: the model class for these `general.architecture` values."""
    def add(cls: type) -> type:
        for arch in architectures:
            if arch in _REGISTRY and _REGISTRY[arch] is not cls:
                raise RuntimeError(f"architecture '{arch}' is registered twice")
            _REGISTRY[arch] = cls
        return cls
    return add


def _discover() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name not in _NOT_MODELS:
            importlib.import_module(f"{__name__}.{module.name}")


def supported() -> list[str]:
    """The architectures this version runs."""
    _discover()
    return sorted(_REGISTRY)


def model_class(arch: str, where: str = "model") -> type:
    if arch not in supported():
        raise UnsupportedModelError(f"{where}: architecture '{arch}' is not supported yet "
                                    f"(supported: {', '.join(supported())})")
    return _REGISTRY[arch]


def config_from_metadata(md: dict, where: str = "model") -> ModelConfig:
    """The model's config, parsed by its own architecture's file (metadata only: see `model_config`)."""
    return model_class(Metadata(md, where).arch, where).Config.from_metadata(md, where)


def model_config(gguf) -> ModelConfig:
    """The config of an opened GGUF file, checked against its tensors' shapes: what every load goes through, before
    a device is opened or a byte of weights read."""
    config = config_from_metadata(gguf.metadata, gguf.name)
    config.check_tensors(gguf.tensors, gguf.name)
    return config
