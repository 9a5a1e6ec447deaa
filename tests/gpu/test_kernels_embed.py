"""The embedding kernel (shaders/embed.wgsl through `ops.embed`) against the `gguf` package, for every GPU type.

Embedding lookups decode rows without summing anything, so they check each WGSL block decoder value by value:
the only rounding difference allowed is that of a fused multiply-add (scale * q - min computed in one step),
hence |err| <= 1e-6 * max|ref|. Outputs are poisoned with NaN before each run.
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_util import (  # noqa: F401 (gpu, rng and split_gpu are fixtures)
    ALL_TYPES, SPLIT_BINDING, Gpu, assert_close, block_elems, case_id, gpu, random_weight, rng, split_gpu,
)

from llmchat.gguf.types import BLOCK_LAYOUT, GGMLType
from llmchat.gpu import ops
from llmchat.gpu.tensors import Weight

pytestmark = pytest.mark.gpu

DECODE_REL = 1e-6


def lookup(g: Gpu, rng: np.random.Generator, qtype: GGMLType, rows: int, k: int, ids: list[int], *,
           scale: float = 1.0, recorded: int | None = None) -> tuple[np.ndarray, np.ndarray, Weight]:
    """Embed `ids` from a random table in a program recorded for `recorded` tokens (default: all of `ids`).

    Returns (output rows, table values, the uploaded table).
    """
    recorded = recorded or len(ids)
    raw, table = random_weight(rng, qtype, rows, k)
    weight = g.weight("token_embd", qtype, raw)
    rec = g.recorder(len(ids))
    y = g.poisoned(rec, "y", recorded, k)
    ops.embed(rec, weight, g.tokens(ids + [0] * (recorded - len(ids))), y, scale)
    g.run(rec)
    return g.read(y), table, weight


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=case_id)
def test_embed_matches_reference(gpu: Gpu, rng, qtype: GGMLType):
    """First and last rows, repeats; rows of 512 elements: two K-quant super-blocks, sixteen 32-element blocks."""
    rows, k = 45, 2 * max(256, block_elems(qtype))
    ids = [0, rows - 1, 7, 7] + rng.integers(0, rows, 7).tolist()
    got, table, _ = lookup(gpu, rng, qtype, rows, k, ids)
    assert_close(got, table[ids], rel=DECODE_REL, abs_=0.0, what=qtype.name)


def test_embed_scales_long_rows(gpu: Gpu, rng):
    """A row of 65 sub-blocks needs two workgroups along x; every element is multiplied by `scale`."""
    rows, k = 20, 65 * 32
    ids = rng.integers(0, rows, 5).tolist()
    got, table, _ = lookup(gpu, rng, GGMLType.Q5_1, rows, k, ids, scale=0.125)
    assert_close(got, table[ids] * 0.125, rel=DECODE_REL, abs_=0.0)


@pytest.mark.parametrize("qtype", [GGMLType.Q4_0, GGMLType.Q3_K, GGMLType.Q6_K], ids=case_id)
def test_embed_table_split_into_parts(split_gpu: Gpu, rng, qtype: GGMLType):
    """Each part of a split table fills exactly the tokens whose rows it holds, whatever the order of ids."""
    k = max(256, block_elems(qtype))
    row_bytes = k // BLOCK_LAYOUT[qtype][0] * BLOCK_LAYOUT[qtype][1]
    per_part = SPLIT_BINDING // row_bytes
    rows = 2 * per_part + per_part // 2 + 1
    # Both ends of every part, then random rows.
    edges = [r for start in range(0, rows, per_part) for r in (start, min(start + per_part, rows) - 1)]
    ids = rng.permutation(edges + rng.integers(0, rows, 5).tolist()).tolist()
    got, table, weight = lookup(split_gpu, rng, qtype, rows, k, ids)
    assert len(weight.parts) == 3
    assert_close(got, table[ids], rel=DECODE_REL, abs_=0.0, what=qtype.name)


def test_embed_runs_only_the_tokens_of_the_step(gpu: Gpu, rng):
    """A program recorded for 8 tokens and run for 5 writes 5 rows."""
    rows, k, n_tokens = 30, 256, 5
    ids = rng.integers(0, rows, n_tokens).tolist()
    got, table, _ = lookup(gpu, rng, GGMLType.Q8_0, rows, k, ids, recorded=8)
    assert_close(got[:n_tokens], table[ids], rel=DECODE_REL, abs_=0.0)
    assert np.isnan(got[n_tokens:]).all()
