"""GGUF tensor formats as numpy references: the ground truth every WGSL dequantization kernel is tested against.

This package is for tools and tests, not the runtime: the runtime (`llmchat`, which also runs inside Pyodide)
uses the standard library alone and never imports it, and it needs numpy, which llmchat installs only with its
`quant` (or `test`) extra: `pip install 'llmchat[quant]'`. Without numpy, importing it raises
`llmchat.errors.MissingDependencyError` saying so.

Each format is a class registered under its GGML type id, with `type`, `block_elems`, `block_bytes`,
`f16_fields`, `dequantize(blocks)` and, for the formats llama.cpp quantizes without a search, `quantize(values)`.
Results match the `gguf` package bit for bit. The class docstrings give each block layout byte by byte.
`random_blocks` and `random_weights` make random tensors of any quantized type, encoder or not.

======  ===========  ===========  ============  =========
type    block elems  block bytes  bits/weight   quantize
======  ===========  ===========  ============  =========
F32     1            4            32            yes
F16     1            2            16            yes
BF16    1            2            16            yes
Q4_0    32           18           4.5           yes
Q4_1    32           20           5             yes
Q5_0    32           22           5.5           yes
Q5_1    32           24           6             yes
Q8_0    32           34           8.5           yes
Q2_K    256          84           2.625         no
Q3_K    256          110          3.4375        no
Q4_K    256          144          4.5           no
Q5_K    256          176          5.5           no
Q6_K    256          210          6.5625        no
IQ4_NL  32           18           4.5           no
IQ4_XS  256          136          4.25          no
======  ===========  ===========  ============  =========

Use:
    fmt = get(GGMLType.Q4_1)                       # the class; UnsupportedModelError for other types
    w = dequantize(raw, GGMLType.Q4_1, (576, 1536))  # GGUF shape in, numpy (1536, 576) float32 out
    raw = quantize(w, GGMLType.Q4_1)               # uint8 (1536, 360)
    raw = random_weights(rng, GGMLType.Q4_K, (576, 1536), spread=0.03)  # uint8 (576, 864): std ~0.03
"""
try:
    import numpy  # noqa: F401  (checked here, once, so the error says what to install)
except ImportError as exc:
    from llmchat.errors import MissingDependencyError

    raise MissingDependencyError(
        "llmchat.quant (the numpy reference quantizers) needs numpy, which is not installed: "
        "pip install 'llmchat[quant]' (the 'test' extra includes it too)"
    ) from exc

from .base import BlockFormat, get, supported_types
from .floats import BF16, F16, F32
from .iquants import IQ4_NL, IQ4_XS
from .kquants import Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
from .legacy import Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
from .synthetic import random_blocks, random_weights
from .tensor import dequantize, quantize

__all__ = [
    "BF16",
    "F16",
    "F32",
    "IQ4_NL",
    "IQ4_XS",
    "Q2_K",
    "Q3_K",
    "Q4_0",
    "Q4_1",
    "Q4_K",
    "Q5_0",
    "Q5_1",
    "Q5_K",
    "Q6_K",
    "Q8_0",
    "BlockFormat",
    "dequantize",
    "get",
    "quantize",
    "random_blocks",
    "random_weights",
    "supported_types",
]
