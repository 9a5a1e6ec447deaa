"""The numpy quant references against the `gguf` package (bit for bit), against the layouts their docstrings
describe (a per-element decoder written from the words alone), and on the real SmolLM2 tensors."""
from __future__ import annotations

import re
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from llmchat import quant
from llmchat.errors import GGUFError, UnsupportedModelError
from llmchat.gguf.types import BLOCK_LAYOUT, GGMLType
from llmchat.quant.synthetic import SPREAD_SAMPLE

ALL_TYPES = [
    GGMLType.F32, GGMLType.F16, GGMLType.BF16,
    GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0,
    GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K,
    GGMLType.IQ4_NL, GGMLType.IQ4_XS,
]  # fmt: skip
QUANTIZABLE = ALL_TYPES[:8]
BLOCK_TYPES = ALL_TYPES[3:]  # the quantized types: blocks of 32 or 256 elements with f16 scales

def reference_type(ggml_type: GGMLType) -> gguf.GGMLQuantizationType:
    return gguf.GGMLQuantizationType(int(ggml_type))


def random_blocks(ggml_type: GGMLType, n_blocks: int, rng: np.random.Generator) -> np.ndarray:
    """Random payload bytes with finite f16 fields (any finite pattern: zeros, subnormals, negatives, 65504).

    Random bits there could be inf/NaN, which would make the comparison meaningless. F32 and BF16 have no f16
    fields and keep raw random bits: their decoding is a bit reinterpretation and the bitwise comparison covers NaN
    payloads too."""
    blocks = rng.integers(0, 256, (n_blocks, BLOCK_LAYOUT[ggml_type][1]), dtype=np.uint8)
    for offset in quant.get(ggml_type).f16_fields:
        bits = rng.integers(0, 1 << 16, n_blocks, dtype=np.uint16)
        exponent_all_ones = (bits & 0x7C00) == 0x7C00
        bits[exponent_all_ones] &= np.uint16(0xBFFF)  # clear the top exponent bit: a large finite value
        blocks[:, offset : offset + 2] = bits.astype("<u2").view(np.uint8).reshape(n_blocks, 2)
    return blocks


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal shapes and identical float32 bit patterns (so -0.0 != 0.0 and NaN payloads count)."""
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


# --- registry and documentation --------------------------------------------------------------------------------


def test_every_listed_type_is_registered_with_the_shared_block_layout():
    assert set(quant.supported_types()) == set(ALL_TYPES)
    for ggml_type in ALL_TYPES:
        fmt = quant.get(ggml_type)
        assert fmt.type is ggml_type
        assert (fmt.block_elems, fmt.block_bytes) == BLOCK_LAYOUT[ggml_type]
        assert fmt.can_quantize() == (ggml_type in QUANTIZABLE)
        assert "byte" in (fmt.__doc__ or "")


def test_overview_table_in_package_docstring_matches_the_classes():
    rows = re.findall(r"^(\w+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(yes|no)\s*$", quant.__doc__ or "", re.MULTILINE)
    assert [name for name, *_ in rows] == [t.name for t in ALL_TYPES]
    for name, elems, nbytes, bits, can_quantize in rows:
        fmt = quant.get(GGMLType[name])
        assert (int(elems), int(nbytes)) == (fmt.block_elems, fmt.block_bytes)
        assert float(bits) == fmt.bits_per_weight()
        assert (can_quantize == "yes") == fmt.can_quantize()


@pytest.mark.parametrize("ggml_type", BLOCK_TYPES, ids=lambda t: t.name)
def test_f16_fields_are_the_documented_ones(ggml_type: GGMLType):
    fmt = quant.get(ggml_type)
    documented = re.findall(r"^\s*bytes\s+(\d+)\.\.(\d+)\s+\w+\s+f16 ", fmt.__doc__ or "", re.MULTILINE)
    assert tuple(int(first) for first, _ in documented) == fmt.f16_fields
    assert all(int(last) == int(first) + 1 for first, last in documented)


@pytest.mark.parametrize("ggml_type", BLOCK_TYPES, ids=lambda t: t.name)
def test_values_scale_with_the_f16_fields_together(ggml_type: GGMLType):
    """Halving every f16 field halves every value exactly, so no scale lies outside them: what makes random bytes
    elsewhere safe and lets `random_weights` set a spread through them alone."""
    fmt = quant.get(ggml_type)
    blocks = quant.random_blocks(np.random.default_rng(int(ggml_type)), ggml_type, (6, fmt.block_elems))
    halved = blocks.copy()
    for offset in fmt.f16_fields:
        field = np.ascontiguousarray(blocks[:, offset : offset + 2]).view("<f2")
        halved[:, offset : offset + 2] = (field / np.float16(2)).view(np.uint8)
    assert same_bits(fmt.dequantize(halved), fmt.dequantize(blocks) / np.float32(2))


def test_get_accepts_plain_ids_and_names_unsupported_types():
    assert quant.get(3) is quant.Q4_1
    with pytest.raises(UnsupportedModelError, match="IQ2_XXS"):
        quant.get(GGMLType.IQ2_XXS)
    with pytest.raises(UnsupportedModelError, match="Q8_K"):
        quant.get(int(GGMLType.Q8_K))
    with pytest.raises(UnsupportedModelError, match="99"):
        quant.get(99)


# Imports every runtime module with numpy made unimportable, then lists what of llmchat.quant got imported and
# what importing llmchat.quant itself says.
WITHOUT_NUMPY = """
import importlib, pkgutil, sys
sys.modules["numpy"] = None  # `import numpy` now fails as if it were not installed
import llmchat
for module in pkgutil.walk_packages(llmchat.__path__, "llmchat."):
    if not module.name.startswith(("llmchat.quant", "llmchat.web", "llmchat.shaders")) and module.name != "llmchat.__main__":
        importlib.import_module(module.name)
print(sorted(name for name in sys.modules if name.startswith("llmchat.quant")))
from llmchat.errors import MissingDependencyError
try:
    import llmchat.quant
except MissingDependencyError as exc:
    print(exc)
"""


def test_runtime_never_imports_quant_which_names_its_extra_without_numpy():
    result = subprocess.run([sys.executable, "-c", WITHOUT_NUMPY], capture_output=True, text=True, check=True)
    imported, message = result.stdout.splitlines()
    assert imported == "[]"
    assert "needs numpy" in message and "llmchat[quant]" in message


def test_formats_are_not_instantiated():
    with pytest.raises(TypeError):
        quant.Q4_0()


# --- dequantize vs gguf ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_blocks", [1, 5, 333])
@pytest.mark.parametrize("ggml_type", ALL_TYPES, ids=lambda t: t.name)
def test_dequantize_matches_gguf_bit_for_bit(ggml_type: GGMLType, n_blocks: int):
    rng = np.random.default_rng([int(ggml_type), n_blocks])
    blocks = random_blocks(ggml_type, n_blocks, rng)
    ours = quant.get(ggml_type).dequantize(blocks)
    theirs = gguf.quants.dequantize(blocks, reference_type(ggml_type))
    assert ours.dtype == np.float32 and ours.flags.c_contiguous
    assert same_bits(ours, theirs.reshape(ours.shape))
    assert ours.shape == (n_blocks, BLOCK_LAYOUT[ggml_type][0])


def test_dequantize_accepts_strided_block_arrays():
    rng = np.random.default_rng(7)
    wide = random_blocks(GGMLType.Q6_K, 8, rng)
    strided = wide[::2]
    assert same_bits(quant.Q6_K.dequantize(strided), quant.Q6_K.dequantize(strided.copy()))


# --- the docstrings' layouts, decoded one element at a time ----------------------------------------------------
# Each decoder below is written from the class docstring alone, the way a kernel author would read it. Arithmetic
# uses numpy float32 scalars in the documented order, so agreement is exact.

F32 = np.float32


def f16_at(block: bytes, offset: int) -> np.float32:
    return F32(np.frombuffer(block, "<f2", count=1, offset=offset)[0])


def int8(byte: int) -> int:
    return byte - 256 if byte > 127 else byte


def decode_q4_0(b: bytes, e: int) -> np.float32:
    q = (b[2 + e % 16] >> 4 * (e // 16)) & 15
    return f16_at(b, 0) * F32(q - 8)


def decode_q4_1(b: bytes, e: int) -> np.float32:
    q = (b[4 + e % 16] >> 4 * (e // 16)) & 15
    return f16_at(b, 0) * F32(q) + f16_at(b, 2)


def decode_q5_0(b: bytes, e: int) -> np.float32:
    q = ((b[6 + e % 16] >> 4 * (e // 16)) & 15) | ((b[2 + e // 8] >> e % 8) & 1) << 4
    return f16_at(b, 0) * F32(q - 16)


def decode_q5_1(b: bytes, e: int) -> np.float32:
    q = ((b[8 + e % 16] >> 4 * (e // 16)) & 15) | ((b[4 + e // 8] >> e % 8) & 1) << 4
    return f16_at(b, 0) * F32(q) + f16_at(b, 2)


def decode_q8_0(b: bytes, e: int) -> np.float32:
    return f16_at(b, 0) * F32(int8(b[2 + e]))


def decode_q2_k(b: bytes, e: int) -> np.float32:
    h, s, l, j = e // 128, e % 128 // 32, e % 32, e // 16
    q = (b[16 + 32 * h + l] >> 2 * s) & 3
    return (f16_at(b, 80) * F32(b[j] & 15)) * F32(q) - f16_at(b, 82) * F32(b[j] >> 4)


def decode_q3_k(b: bytes, e: int) -> np.float32:
    h, s, l, j = e // 128, e % 128 // 32, e % 32, e // 16
    q = ((b[32 + 32 * h + l] >> 2 * s) & 3) - (0 if (b[l] >> e // 32) & 1 else 4)
    low = b[96 + j] & 15 if j < 8 else b[96 + j - 8] >> 4
    high = (b[104 + j % 4] >> 2 * (j // 4)) & 3
    return (f16_at(b, 108) * F32((low | high << 4) - 32)) * F32(q)


def k4_scale_min(b: bytes, j: int) -> tuple[int, int]:
    s = b[4:16]
    if j < 4:
        return s[j] & 63, s[j + 4] & 63
    return (s[j + 4] & 15) | (s[j - 4] >> 6) << 4, (s[j + 4] >> 4) | (s[j] >> 6) << 4


def decode_q4_k(b: bytes, e: int) -> np.float32:
    c, k, l = e // 64, e % 64 // 32, e % 32
    q = (b[16 + 32 * c + l] >> 4 * k) & 15
    sc, m = k4_scale_min(b, e // 32)
    return (f16_at(b, 0) * F32(sc)) * F32(q) - f16_at(b, 2) * F32(m)


def decode_q5_k(b: bytes, e: int) -> np.float32:
    c, k, l = e // 64, e % 64 // 32, e % 32
    q = (b[48 + 32 * c + l] >> 4 * k) & 15 | ((b[16 + l] >> e // 32) & 1) << 4
    sc, m = k4_scale_min(b, e // 32)
    return (f16_at(b, 0) * F32(sc)) * F32(q) - f16_at(b, 2) * F32(m)


def decode_q6_k(b: bytes, e: int) -> np.float32:
    h, s, l, j = e // 128, e % 128 // 32, e % 32, e // 16
    low = (b[64 * h + 32 * (s % 2) + l] >> 4 * (s // 2)) & 15
    high = (b[128 + 32 * h + l] >> 2 * s) & 3
    return (f16_at(b, 208) * F32(int8(b[192 + j]))) * F32((low | high << 4) - 32)


IQ4_GRID = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)


def decode_iq4_nl(b: bytes, e: int) -> np.float32:
    q = (b[2 + e % 16] >> 4 * (e // 16)) & 15
    return f16_at(b, 0) * F32(IQ4_GRID[q])


def decode_iq4_xs(b: bytes, e: int) -> np.float32:
    j, l = e // 32, e % 32
    low = (b[4 + j // 2] >> 4 * (j % 2)) & 15
    high = ((b[2] | b[3] << 8) >> 2 * j) & 3
    q = (b[8 + 16 * j + l % 16] >> 4 * (l // 16)) & 15
    return (f16_at(b, 0) * F32((low | high << 4) - 32)) * F32(IQ4_GRID[q])


ELEMENT_DECODERS: dict[GGMLType, Callable[[bytes, int], np.float32]] = {
    GGMLType.Q4_0: decode_q4_0,
    GGMLType.Q4_1: decode_q4_1,
    GGMLType.Q5_0: decode_q5_0,
    GGMLType.Q5_1: decode_q5_1,
    GGMLType.Q8_0: decode_q8_0,
    GGMLType.Q2_K: decode_q2_k,
    GGMLType.Q3_K: decode_q3_k,
    GGMLType.Q4_K: decode_q4_k,
    GGMLType.Q5_K: decode_q5_k,
    GGMLType.Q6_K: decode_q6_k,
    GGMLType.IQ4_NL: decode_iq4_nl,
    GGMLType.IQ4_XS: decode_iq4_xs,
}


@pytest.mark.parametrize("ggml_type", list(ELEMENT_DECODERS), ids=lambda t: t.name)
def test_documented_layout_decodes_each_element_the_same(ggml_type: GGMLType):
    decode = ELEMENT_DECODERS[ggml_type]
    blocks = random_blocks(ggml_type, 3, np.random.default_rng(int(ggml_type)))
    fmt = quant.get(ggml_type)
    expected = np.array(
        [[decode(block.tobytes(), e) for e in range(fmt.block_elems)] for block in blocks], dtype=np.float32
    )
    assert same_bits(fmt.dequantize(blocks), expected)


# --- quantize vs gguf ------------------------------------------------------------------------------------------


def awkward_rows(rng: np.random.Generator) -> np.ndarray:
    """64-wide rows (two legacy blocks each) that exercise the encoders' corner cases."""
    rows = [
        np.zeros(64),  # d = 0: the zero-division guard
        np.full(64, 3.0),  # max == min
        np.full(64, -1e-3),
        np.arange(64) - 31.5,  # Q8_0 quants at exact halves before rounding (roundf, not round-half-even)
        np.tile([5.0, -5.0, 1.0, 0.0], 16),  # magnitude tie between signs: the first one sets Q4_0/Q5_0's sign
        np.tile([-5.0, 5.0, 1.0, 0.0], 16),
        rng.standard_normal(64) * 1e-6,  # tiny scales, f16 subnormal d
        rng.standard_normal(64) * 4e4,  # large: some stored scales exceed f16
        rng.standard_normal(64) * 1e5,
        np.where(rng.random(64) < 0.5, 1.0, -1.0) * np.float32(0.49999997),  # just below a rounding half
    ]
    scaled = rng.standard_normal((54, 64)) * np.exp(rng.uniform(-8, 8, (54, 1)))
    return np.concatenate([np.array(rows), scaled]).astype(np.float32)


def float_specials() -> np.ndarray:
    """Bit patterns that float encoders must round or preserve exactly."""
    bits = np.array(
        [
            0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  # +-0, +-inf
            0x7FC00000, 0xFFC00001, 0x7F800001, 0xFF812345,  # quiet and signalling NaNs with payloads
            0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F7FFFFF,  # bf16 ties (to even both ways), just under, max
            0x00000001, 0x387FC000, 0x477FF000, 0x477FEFFF,  # subnormal, f16 tie points and overflow edge
        ],
        dtype=np.uint32,
    )  # fmt: skip
    return bits.view(np.float32).reshape(1, -1)


@pytest.mark.parametrize("ggml_type", QUANTIZABLE, ids=lambda t: t.name)
def test_quantize_matches_gguf_bit_for_bit(ggml_type: GGMLType):
    values = awkward_rows(np.random.default_rng(int(ggml_type)))
    if BLOCK_LAYOUT[ggml_type][0] == 1:
        values = np.concatenate([values, np.tile(float_specials(), (1, 4))])
    with np.errstate(over="ignore", invalid="ignore"):  # the reference warns on f16 overflow and NaN casts
        ours = quant.quantize(values, ggml_type)
        theirs = gguf.quants.quantize(values, reference_type(ggml_type))
    assert ours.dtype == np.uint8
    assert np.array_equal(ours, np.ascontiguousarray(theirs).view(np.uint8).reshape(ours.shape))


@settings(max_examples=60, deadline=None)
@given(
    ggml_type=st.sampled_from([t for t in QUANTIZABLE if BLOCK_LAYOUT[t][0] == 32]),
    values=hnp.arrays(
        np.float32,
        st.tuples(st.integers(1, 3), st.just(32)),
        elements=st.floats(-(2.0**100), 2.0**100, width=32),
    ),
)
def test_quantize_matches_gguf_on_generated_blocks(ggml_type: GGMLType, values: np.ndarray):
    # Blocks of magnitude below 2**-90 can make 1/d overflow, where llama.cpp (and so gguf) cast inf to an
    # integer: undefined, and covered separately below.
    defined = np.abs(values).max(axis=1) >= 2.0**-90
    with np.errstate(over="ignore", invalid="ignore"):
        ours = quant.quantize(values, ggml_type)
        theirs = gguf.quants.quantize(values, reference_type(ggml_type))
    assert np.array_equal(ours[defined], theirs.view(np.uint8)[defined])


@pytest.mark.parametrize("ggml_type", [t for t in QUANTIZABLE if BLOCK_LAYOUT[t][0] == 32], ids=lambda t: t.name)
def test_blocks_too_small_for_a_finite_inverse_scale_encode_as_zero(ggml_type: GGMLType):
    values = np.array([np.full(32, 1e-40), np.linspace(-3e-39, 2e-39, 32)], dtype=np.float32)
    fmt = quant.get(ggml_type)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an inf or NaN reaching the integer cast warns
        blocks = fmt.quantize(values)
    assert not fmt.dequantize(blocks).any()


# Worst-case error of one block as (multiple of the quantization step, step as a fraction of the block's range).
# Q4_0/Q5_0 put the largest magnitude on the grid's edge and clip its mirror image, hence a full step there; the
# rest round to nearest. A further max|x| * 2**-9 covers the f16 rounding of the stored scale and offset.
ROUND_TRIP_STEP = {
    GGMLType.Q4_0: (1.0, lambda amax, span: amax / 8),
    GGMLType.Q4_1: (0.5, lambda amax, span: span / 15),
    GGMLType.Q5_0: (1.0, lambda amax, span: amax / 16),
    GGMLType.Q5_1: (0.5, lambda amax, span: span / 31),
    GGMLType.Q8_0: (0.5, lambda amax, span: amax / 127),
}


@pytest.mark.parametrize("ggml_type", list(ROUND_TRIP_STEP), ids=lambda t: t.name)
def test_round_trip_error_is_within_half_a_step(ggml_type: GGMLType):
    rng = np.random.default_rng(int(ggml_type))
    blocks = (rng.standard_normal((500, 32)) * np.exp(rng.uniform(-6, 6, (500, 1)))).astype(np.float32)
    fmt = quant.get(ggml_type)
    error = np.abs(fmt.dequantize(fmt.quantize(blocks)) - blocks).max(axis=1)
    amax = np.abs(blocks).max(axis=1)
    span = blocks.max(axis=1) - blocks.min(axis=1)
    steps, step = ROUND_TRIP_STEP[ggml_type]
    bound = steps * step(amax, span) + amax * 2.0**-9
    assert np.all(error <= bound)
    # and the bound is not vacuous: typical errors use a good part of it
    assert np.median(error / bound) > 0.2


@pytest.mark.parametrize(
    ("ggml_type", "relative"), [(GGMLType.F32, 0.0), (GGMLType.F16, 2.0**-11), (GGMLType.BF16, 2.0**-8)]
)
def test_float_round_trip_is_within_half_an_ulp(ggml_type: GGMLType, relative: float):
    values = (np.random.default_rng(3).standard_normal((300, 1)) * 100).astype(np.float32)
    fmt = quant.get(ggml_type)
    assert np.all(np.abs(fmt.dequantize(fmt.quantize(values)) - values) <= np.abs(values) * relative)


def test_quantize_without_an_encoder_is_refused_by_name():
    with pytest.raises(UnsupportedModelError, match="Q4_K"):
        quant.quantize(np.zeros((1, 256), np.float32), GGMLType.Q4_K)
    with pytest.raises(UnsupportedModelError, match="Q6_K"):
        quant.Q6_K.quantize(np.zeros((1, 256), np.float32))


# --- whole tensors in GGUF shape order -------------------------------------------------------------------------


def test_tensor_dequantize_reverses_the_gguf_shape_and_keeps_rows_in_order():
    rng = np.random.default_rng(11)
    blocks = random_blocks(GGMLType.Q8_0, 2 * 3 * 4, rng)  # ne = (64, 3, 4): two blocks per row
    tensor = quant.dequantize(blocks.tobytes(), GGMLType.Q8_0, (64, 3, 4))
    assert tensor.shape == (4, 3, 64)
    per_block = quant.Q8_0.dequantize(blocks)
    assert same_bits(tensor.reshape(-1), per_block.reshape(-1))
    assert same_bits(tensor[1, 2, 32:], per_block[(1 * 3 + 2) * 2 + 1])


def test_tensor_dequantize_accepts_any_buffer():
    rng = np.random.default_rng(12)
    blocks = random_blocks(GGMLType.Q4_1, 6, rng)
    expected = quant.dequantize(blocks, GGMLType.Q4_1, (96, 2))
    raw = blocks.tobytes()
    for data in (raw, bytearray(raw), memoryview(raw), np.frombuffer(raw, np.uint8)):
        assert same_bits(quant.dequantize(data, GGMLType.Q4_1, (96, 2)), expected)
    floats = rng.standard_normal((3, 5)).astype(np.float32)  # F32 data handed over as a float array
    assert same_bits(quant.dequantize(floats, GGMLType.F32, (5, 3)), floats)


def test_tensor_dequantize_rejects_data_that_does_not_fit_the_shape():
    raw = bytes(20 * 4)
    with pytest.raises(GGUFError, match="needs 80 bytes, got 60"):
        quant.dequantize(raw[:60], GGMLType.Q4_1, (64, 2))
    with pytest.raises(GGUFError, match="not a multiple"):
        quant.dequantize(raw, GGMLType.Q4_1, (48, 2))
    with pytest.raises(UnsupportedModelError, match="IQ3_S"):
        quant.dequantize(raw, GGMLType.IQ3_S, (256,))


def test_tensor_quantize_returns_rows_of_blocks_that_decode_back():
    values = np.random.default_rng(13).standard_normal((2, 3, 64)).astype(np.float32)
    raw = quant.quantize(values, GGMLType.Q8_0)
    assert raw.shape == (2, 3, 68) and raw.dtype == np.uint8
    back = quant.dequantize(raw.tobytes(), GGMLType.Q8_0, (64, 3, 2))
    assert back.shape == values.shape
    assert np.abs(back - values).max() <= np.abs(values).max() / 127
    with pytest.raises(ValueError, match="multiple of 32"):
        quant.quantize(np.zeros((2, 48), np.float32), GGMLType.Q4_0)


def test_block_methods_check_their_arguments():
    with pytest.raises(TypeError, match="uint8"):
        quant.Q4_0.dequantize(np.zeros((1, 18), np.int8))
    with pytest.raises(ValueError, match=r"\(n_blocks, 18\)"):
        quant.Q4_0.dequantize(np.zeros((1, 20), np.uint8))
    with pytest.raises(ValueError, match=r"\(n_blocks, 32\)"):
        quant.Q4_0.quantize(np.zeros(32, np.float32))


# --- random tensors --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ggml_type", BLOCK_TYPES, ids=lambda t: t.name)
def test_random_blocks_have_sane_f16_fields_and_finite_values(ggml_type: GGMLType):
    fmt = quant.get(ggml_type)
    raw = quant.random_blocks(np.random.default_rng(1), ggml_type, (3, 2 * fmt.block_elems))
    assert raw.dtype == np.uint8 and raw.shape == (3, 2 * fmt.block_bytes)
    blocks = raw.reshape(-1, fmt.block_bytes)
    for offset in fmt.f16_fields:
        magnitude = np.abs(np.ascontiguousarray(blocks[:, offset : offset + 2]).view("<f2"))
        assert np.all((magnitude >= np.float16(0.005)) & (magnitude <= np.float16(0.05)))
    assert np.isfinite(fmt.dequantize(blocks)).all()


@pytest.mark.parametrize("ggml_type", BLOCK_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("rows", [8, 512], ids=["measured", "sampled"])
def test_random_weights_have_the_spread_asked_for(ggml_type: GGMLType, rows: int):
    """Exact but for the f16 rounding of the scale where every block is measured; close where only a sample is.
    (A spread whose scale is a normal f16 for every type: smaller ones get the coarser steps of subnormal f16.)"""
    raw = quant.random_weights(np.random.default_rng(2), ggml_type, (rows, 4096), 0.5)
    measured = raw.size // quant.get(ggml_type).block_bytes <= SPREAD_SAMPLE
    assert measured == (rows == 8)
    values = quant.dequantize(raw, ggml_type, (4096, rows))
    assert values.std() == pytest.approx(0.5, rel=1e-3 if measured else 2e-2)


def test_random_tensors_refuse_float_types_and_partial_blocks():
    rng = np.random.default_rng(3)
    with pytest.raises(ValueError, match="F16"):
        quant.random_blocks(rng, GGMLType.F16, (2, 32))
    with pytest.raises(ValueError, match="multiple of 256"):
        quant.random_weights(rng, GGMLType.Q4_K, (2, 128), 0.1)


# --- the real model --------------------------------------------------------------------------------------------


@pytest.mark.model
def test_real_model_tensors_match_gguf_for_every_type_present(smollm2_path: Path):
    reader = gguf.GGUFReader(smollm2_path)
    smallest: dict[int, gguf.ReaderTensor] = {}
    for tensor in reader.tensors:
        kind = int(tensor.tensor_type)
        if kind not in smallest or tensor.n_bytes < smallest[kind].n_bytes:
            smallest[kind] = tensor
    assert {GGMLType.F32, GGMLType.Q4_1, GGMLType.Q8_0} <= set(smallest)
    for kind, tensor in smallest.items():
        ours = quant.dequantize(tensor.data, kind, [int(n) for n in tensor.shape])
        theirs = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        assert same_bits(ours, theirs), tensor.name
        assert ours.shape == tuple(int(n) for n in reversed(tensor.shape))
        assert np.isfinite(ours).all(), tensor.name
