"""Which variant of each kernel family an adapter runs: decided here, in one place, from the adapter's kind.

What wins differs by orders of magnitude between real GPUs and CPU emulations of them (lavapipe, SwiftShader):
- GPUs hide memory latency with many invocations, so a matmul invocation computes one output row and
  neighbouring invocations read neighbouring rows.
- On CPU emulators invocations are SIMD lanes, and every load from a storage buffer becomes a scalar loop over the
  lanes (Mesa 22's lavapipe), so loads, not arithmetic, set the speed. A matmul invocation there computes 8 rows
  (decode) or an 8-row x 8-token tile (prefill) so each load of x serves many multiply-adds; where subgroups have
  at least 8 lanes, the lanes of a subgroup load a block of x together and broadcast it (matmul_x_shared.wgsl).
  Measured on lavapipe (2 cores), decode matvec of 576 x 1536 Q4_1: 0.7 G multiply-adds/s with one row per
  invocation, 2.8 with 8 rows, 3.2 with 8 rows and shared x loads; prefill tile of 4 rows x 8 tokens: 8.5 with
  shared loads, 3.2 without; 8 rows x 8 tokens another 1.15x.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

from .device import Device, Dispatch
from .kernels import Kernels

ATTN_PARALLEL = 1024  # (token, head, range) invocations attention aims for on GPUs before it stops cutting ranges
ATTN_MIN_RANGE = 32  # positions per range below which cutting a context further costs more than it gains
SOFTWARE_MAX_RANGE = 256  # positions one attention invocation may walk on CPU emulators (see attention_splits)
# Attention kernels: "invocation" (attention.wgsl, one invocation per (token, head, range)) and "flash"
# (attention_flash.wgsl, a workgroup per (token tile, kv group, range) sharing coalesced K/V tile loads).
ATTENTION_KERNELS = ("invocation", "flash")
FLASH_PARALLEL = 128  # workgroups flash attention aims for on GPUs before it stops cutting ranges


@dataclass(frozen=True)
class MatmulTile:
    """What one matmul invocation computes: `rows` outputs for `tokens` tokens, in workgroups of `wg`."""

    rows: int
    tokens: int
    wg: int
    xload: str  # "plain" or "shared": see shaders/matmul_x_*.wgsl


@dataclass(frozen=True)
class Variants:
    software: bool  # a CPU emulation: loads are expensive, invocations are SIMD lanes
    shared_loads: bool  # subgroups of >= 8 lanes: blocks of x can be loaded once per subgroup

    def matmul(self, tokens: int) -> MatmulTile:
        """The tile for a step of `tokens` tokens (the program's bucket)."""
        if not self.software:
            return MatmulTile(rows=1, tokens=1 if tokens == 1 else 4 if tokens <= 8 else 8, wg=64, xload="plain")
        xload = "shared" if self.shared_loads else "plain"
        if tokens == 1:
            return MatmulTile(rows=8, tokens=1, wg=8, xload=xload)
        return MatmulTile(rows=8, tokens=4 if tokens <= 4 else 8, wg=8, xload=xload)

    def attention_splits(self, rows: int, n_head: int, max_context: int) -> int:
        """Ranges each token's positions are cut into (attention.wgsl). On CPU emulators a range of 128 positions
        per invocation, at most 8: there a split only pays once it spreads real work over the cores, and every
        extra split costs a partial record and the combine pass (which one split skips). Measured on lavapipe,
        30 layers of SmolLM2 decode attention (ms) by splits 1 / 2 / 8 / 64: at 64 positions 3.6 / 4.0 / 6.6 /
        11.4, at 256 16.3 / 10.6 / 12.7 / 26.6, at 2000 72 / 64 / 59 / 68.
        Ranges never exceed SOFTWARE_MAX_RANGE positions, prefill included: on lavapipe (Mesa 22.3) invocations
        over 256-wide heads that walk more than about 475 positions end early without writing their output (seen
        with Gemma 3; 128-wide heads were fine up to 2000), so long prefill chunks are cut too."""
        if not self.software:
            # Enough ranges to occupy the device when few tokens run (decode), one when tokens alone do (prefill),
            # never ranges shorter than ATTN_MIN_RANGE positions of the longest context.
            by_work = -(-ATTN_PARALLEL // (rows * n_head))
            return max(1, min(by_work, -(-max_context // ATTN_MIN_RANGE), 64))
        by_work = min(8, -(-max_context // (128 * rows)))
        return max(1, by_work, -(-max_context // SOFTWARE_MAX_RANGE))

    @property
    def attention_kernel(self) -> str:
        """The attention kernel (ATTENTION_KERNELS). GPUs: flash, whose workgroups load each K/V row once per kv
        group and tile of tokens, coalesced, and keep scores and tiles in workgroup memory. CPU emulators: one
        invocation per (token, head, range), which holds q and the accumulator in registers; there workgroup
        memory loads are scalar loops over the lanes like storage loads, and flash re-reads q and the tile from
        it for every score. Measured on lavapipe (tools/attention_speed.py, f32 cache, ms for all layers),
        invocation vs flash: SmolLM2 decode at 64 / 512 / 2000 positions 3.4 / 17 / 59 vs 20 / 530 / 4600,
        64-token prefill 80 vs 4900; Gemma 3 decode at 2000 positions 300 vs 3300, prefill 1150 vs 4500."""
        return "invocation" if self.software else "flash"

    def attention_candidates(self) -> list[str]:
        """The attention kernels a tuner may time on this adapter, the hand-picked one first (each runs with its
        own split rule; `ops.attention(kernel=..., splits=...)` forces either)."""
        return [self.attention_kernel] + [k for k in ATTENTION_KERNELS if k != self.attention_kernel]

    def flash_splits(self, workgroups: int, max_context: int, tile: int) -> int:
        """Ranges per token for flash attention when `workgroups` (token tiles x kv groups) run: enough to occupy a
        GPU during decode, one when tokens alone do (prefill), never ranges shorter than a tile or ATTN_MIN_RANGE.
        On CPU emulators (forced there by tests and measurements) at most SOFTWARE_MAX_RANGE positions a range,
        as for the invocation kernel."""
        shortest = max(tile, ATTN_MIN_RANGE)
        by_work = -(-FLASH_PARALLEL // workgroups)
        splits = max(1, min(by_work, -(-max_context // shortest), 64))
        if self.software:
            splits = max(splits, -(-max_context // SOFTWARE_MAX_RANGE))
        return splits

    @property
    def split_weights(self) -> bool:
        """Whether weights of the types that have one are rewritten into the split layout after upload
        (tensors.split_weight): on CPU emulators, where it turns 5-9 scalar loads per block into 1-2 vector loads
        and a word or two, and K-quant scales into ready f32 words (decode matvec 576 x 1536 on lavapipe, G
        multiply-adds/s: Q4_1 2.9 -> 3.8, Q4_K 0.59 -> 3.4, Q6_K 0.38 -> 3.2)."""
        return self.software

    @property
    def fold_norms(self) -> bool:
        """Whether RMSNorm folds into the next projection (its sum of squares is accumulated from the blocks of x
        the matmul loads anyway). Always, now that CPU emulators reuse each load of x across many rows: there it
        saves two dispatches per layer."""
        return True


_cache: weakref.WeakKeyDictionary[Device, Variants] = weakref.WeakKeyDictionary()


def variants(device: Device) -> Variants:
    """The variants for `device`, probing it once (the subgroup size needs one tiny dispatch)."""
    v = _cache.get(device)
    if v is None:
        info = device.info
        shared = info.software and info.subgroups and subgroup_size(device) >= 8
        v = _cache[device] = Variants(software=info.software, shared_loads=shared)
    return v


def subgroup_size(device: Device) -> int:
    """The subgroup size compute shaders run with on `device` (0 without subgroups)."""
    if not device.info.subgroups:
        return 0
    out = device.buffer(16, "subgroup_size")
    kernel = Kernels(device).get("subgroup_size.wgsl")
    device.run(device.program([Dispatch(kernel, (out,), (1, 1, 1))]))
    return int.from_bytes(device.read(out, 0, 4), "little")
