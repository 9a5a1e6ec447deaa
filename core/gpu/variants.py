"""Which variant of each kernel family an adapter runs: decided here, in one place, from the adapter's kind, unless
the tuner (tune.py) measured better ones on this adapter.

Matmul variants (MatmulTile; shaders/matmul.wgsl and its matmul_main_<shape>.wgsl):
- "rowgroup", GPU decode: a workgroup per few rows, its invocations on neighbouring blocks of the same row
  (coalesced loads), partial sums added with subgroupAdd where the adapter has subgroups, with a tree in
  workgroup memory where not. The row-per-invocation tile GPUs had before (neighbouring invocations a whole row
  apart) stays among the tuner's candidates.
- "tiled", GPU prefill: a workgroup per tile of rows x tokens; each block of W is decoded once into workgroup
  memory and used for every token of the tile, each block of x loaded once for every row.
- "lanes", CPU emulators (lavapipe, SwiftShader): one invocation per 8-row tile over the whole row. There
  invocations are SIMD lanes and every load from a storage buffer becomes a scalar loop over the lanes (Mesa 22's
  lavapipe), so loads, not arithmetic, set the speed, and workgroup barriers are very expensive. An invocation
  computes 8 rows (decode) or an 8-row x 8-token tile (prefill) so each load of x serves many multiply-adds;
  where subgroups have at least 8 lanes, the lanes of a subgroup load a block of x together and broadcast it
  (matmul_x_shared.wgsl). Measured on lavapipe (2 cores), decode matvec of 576 x 1536 Q4_1: 0.7 G
  multiply-adds/s with one row per invocation, 2.8 with 8 rows, 3.2 with 8 rows and shared x loads; prefill
  tile of 4 rows x 8 tokens: 8.5 with shared loads, 3.2 without; 8 rows x 8 tokens another 1.15x. The GPU
  shapes run there too (tests, tuner), several times slower: barriers and subgroup reductions cost more than
  they save on a CPU.

Kernel families the tuner may choose for register in TUNABLE (see TuneCase); the chosen variants land in
Variants.tuned and are read with Variants.choice(family, key, default).
"""
from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..gguf.types import GGMLType
from .device import TEXTURE_ROW_BYTES, AdapterInfo, Device, Dispatch
from .kernels import Kernels

ATTN_PARALLEL = 1024  # (token, head, range) invocations attention aims for on GPUs before it stops cutting ranges
ATTN_MIN_RANGE = 32  # positions per range below which cutting a context further costs more than it gains
SOFTWARE_MAX_RANGE = 256  # positions one attention invocation may walk on CPU emulators (see attention_splits)
# Attention kernels: "invocation" (attention.wgsl, one invocation per (token, head, range)), "grouped" (the same
# file, one invocation per (token, up to GROUPED_HEADS heads of one kv group, range), loading each K/V row once for
# them) and "flash" (attention_flash.wgsl, a workgroup per (token tile, kv group, range) sharing coalesced K/V tile
# loads), "scores" (attention_scores.wgsl then attention_values.wgsl: every score of a token's heads, then one
# invocation per four elements of each head of a kv group weighing V, for contexts up to SCORES_MAX_SPAN).
ATTENTION_KERNELS = ("invocation", "grouped", "flash", "scores")
SCORES_MAX_SPAN = 16384  # positions the scores kernel may take (attention_values.wgsl walks them twice)
GROUPED_HEADS = 4  # query heads one grouped invocation may hold (attention.wgsl writes its head loops out to 4)
FLASH_PARALLEL = 128  # workgroups flash attention aims for on GPUs before it stops cutting ranges
# Gated delta rule kernels (state_ops.gated_delta): "token" (gated_delta.wgsl, each sequence's tokens one after
# another) and "chunk" (gated_delta_chunk.wgsl, chunks of tokens as small matrix products: prefill).
GATED_DELTA_FORMS = ("token", "chunk")


SHAPES = ("lanes", "rowgroup", "tiled")
# Weight types that int8 dot products (MatmulTile.dot "i8", shaders/matmul_dot_i8.wgsl) take: those whose blocks
# are 32 raw integers that fit a signed byte under one scale and offset (a shaders/<type>_i8.wgsl each).
INT8_TYPES = frozenset({GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q8_0})
WORKGROUP_BYTES = 16384  # workgroup memory every WebGPU adapter offers (maxComputeWorkgroupStorageSize default)


@dataclass(frozen=True)
class MatmulTile:
    """How matmul.wgsl splits the work (see the header of shaders/matmul.wgsl):

    - shape "lanes": one invocation per tile of `rows` outputs x `tokens` tokens over the whole row, `wg` per
      workgroup, x loaded by each lane ("plain") or once per subgroup ("shared"). What CPU emulators run (8 rows).
    - shape "rowgroup": the coalesced matvec of GPUs. One workgroup of `wg` invocations per tile; invocation l
      takes blocks l, l + wg, ... of the tile's rows, so neighbouring invocations read neighbouring blocks, and the
      partial sums are added with subgroupAdd (`reduce` "subgroup") or a tree in workgroup memory ("workgroup").
    - shape "tiled": prefill on GPUs. One workgroup per tile of rows * wg_rows rows x tokens * (wg / wg_rows)
      tokens; each block of W is decoded once into workgroup memory and reused for every token of the tile.

    `dot` "i8" multiplies in 8-bit integers with dot4I8Packed (shaders/matmul_dot_i8.wgsl): x rounded to 8 bits per
    32-element block as llama.cpp does (the numbers of `q8_activations`), weights of INT8_TYPES as raw quants.
    Lanes and rowgroup tiles only (the tiled shape keeps decoded f32 weights in workgroup memory).
    """

    rows: int
    tokens: int
    wg: int
    xload: str = "plain"  # "plain" or "shared": see shaders/matmul_x_*.wgsl
    shape: str = "lanes"
    reduce: str = "none"  # rowgroup: "subgroup" or "workgroup"
    wg_rows: int = 0  # tiled: invocations along rows (the rest run along tokens)
    dot: str = "f32"  # "f32" or "i8": see shaders/matmul_dot_*.wgsl

    def __post_init__(self):
        if (self.shape not in SHAPES or self.rows not in (1, 2, 4, 8, 16) or self.tokens not in (1, 4, 8)
                or (self.rows == 16 and self.shape != "lanes")):
            raise ValueError(f"no matmul kernel for {self}")
        if self.shape != "lanes" and (self.xload != "plain" or self.wg & (self.wg - 1) or self.wg < 4):
            raise ValueError(f"{self.shape} tiles load x plainly and have a power-of-two workgroup >= 4: {self}")
        if (self.shape == "rowgroup") != (self.reduce in ("subgroup", "workgroup")):
            raise ValueError(f"rowgroup tiles, and only they, reduce by subgroup or workgroup: {self}")
        if self.shape == "tiled" and (self.wg_rows < 1 or self.wg % self.wg_rows or self.tile_tokens > self.wg):
            raise ValueError(f"a tiled matmul needs wg_rows | wg and at most wg tokens per tile: {self}")
        if self.dot not in ("f32", "i8") or (self.dot == "i8" and self.shape == "tiled"):
            raise ValueError(f"dot is 'f32', or 'i8' in lanes and rowgroup tiles: {self}")

    @property
    def tile_rows(self) -> int:
        """Outputs one workgroup computes."""
        return self.rows * (self.wg if self.shape == "lanes" else self.wg_rows if self.shape == "tiled" else 1)

    @property
    def tile_tokens(self) -> int:
        """Tokens one workgroup computes."""
        return self.tokens * (self.wg // self.wg_rows if self.shape == "tiled" else 1)

    def workgroup_bytes(self, halves: int) -> int:
        """Workgroup memory the kernel declares (`halves` 2 for the gated mode)."""
        if self.shape == "rowgroup":
            slots = self.wg if self.reduce == "workgroup" else self.wg // 4
            return 4 * slots * (halves * self.rows * self.tokens + self.tokens)
        if self.shape == "tiled":
            return 128 * (halves * self.tile_rows + self.tile_tokens) + 4 * self.tile_tokens
        return 0

    def grid(self, outputs: int, tokens: int) -> tuple[int, int, int]:
        """Workgroups for `outputs` rows and `tokens` tokens; rowgroup grids fold past 65535 into z."""
        groups = -(-outputs // self.tile_rows)
        if self.shape == "rowgroup" and groups > 65535:
            return (65535, -(-tokens // self.tile_tokens), -(-groups // 65535))
        return (groups, -(-tokens // self.tile_tokens), 1)

    def values(self) -> dict[str, object]:
        """The template values of shaders/matmul.wgsl that select this tile."""
        tiled = self.shape == "tiled"
        return {"R": self.rows, "TT": self.tokens, "WG": self.wg, "XLOAD": self.xload, "SHAPE": self.shape,
                "REDUCE": self.reduce, "WGR": self.wg_rows, "ROW_STEP": f" * {self.wg_rows}u" if tiled else "",
                "TOK_STEP": f" * {self.wg // self.wg_rows}u" if tiled else "", "DOT": self.dot}

    def int8(self) -> MatmulTile:
        """This tile with int8 dot products; a tiled one becomes the rowgroup tile of as many rows and tokens per
        invocation (32 invocations, workgroup-memory reduction: portable to every adapter)."""
        if self.shape == "tiled":
            return MatmulTile(self.rows, self.tokens, 32, shape="rowgroup", reduce="workgroup", dot="i8")
        return replace(self, dot="i8")


@dataclass(frozen=True)
class Variants:
    software: bool  # a CPU emulation: loads are expensive, invocations are SIMD lanes
    shared_loads: bool  # subgroups of >= 8 lanes: blocks of x can be loaded once per subgroup
    subgroup_width: int = 0  # lanes per subgroup (0: no subgroups)
    # WGSL's dot4I8Packed is available (AdapterInfo.dot4i8). The fixed table never picks int8 dot products (they
    # round x to 8 bits, so their numbers differ); the tuner times them where activations are rounded anyway
    # (q8_activations), and a load may force them (tune.force_int8).
    int8_dot: bool = False
    textures: bool = False  # the device can hold weights in textures (Device.texture_from; see weight_textures)
    serial_compiler: bool = False  # pipelines compile one after another, seconds apiece (see fuse_gated)
    # Choices the tuner (tune.py) measured on this adapter, by (family, key) such as ("matvec", "Q4_1"); they
    # replace the fixed table below for that family and key. Empty when tuning is off.
    tuned: dict = field(default_factory=dict, compare=False, hash=False)

    def choice(self, family: str, key: str, default):
        """The tuned choice of `family` for `key`, else `default` (the fixed table's)."""
        return self.tuned.get((family, key), default)

    def matmul(self, tokens: int, qtype: str | None = None, textures: bool | None = None) -> MatmulTile:
        """The tile for a step of `tokens` tokens (the program's bucket) over weights of type `qtype` (a GGMLType
        name), read from textures or not (`textures`; None: as this adapter holds split weights): the tuned one
        where the tuner chose, else the fixed table's (`default_matmul`)."""
        default = self.default_matmul(tokens, textures)
        if qtype is None:
            return default
        return self.choice("matvec" if tokens == 1 else "prefill", qtype, default)

    def default_matmul(self, tokens: int, textures: bool | None = None) -> MatmulTile:
        """The fixed per-adapter table. GPUs: the coalesced row-group matvec for decode (subgroupAdd where
        subgroups are, a workgroup-memory tree where not) and the workgroup-memory tiles for prefill. CPU
        emulators: 8 rows per invocation, 16 where the weights are read from textures (`textures`; None: where
        this adapter holds split weights in textures), per the measurements in this module's docstring and
        below."""
        if not self.software:
            reduce = "subgroup" if self.subgroup_width >= 4 else "workgroup"
            if tokens == 1:
                return MatmulTile(rows=2, tokens=1, wg=32, shape="rowgroup", reduce=reduce)
            if tokens <= 4:
                return MatmulTile(rows=2, tokens=4, wg=32, shape="rowgroup", reduce=reduce)
            return MatmulTile(rows=2, tokens=4 if tokens <= 16 else 8, wg=64, shape="tiled", wg_rows=16)
        xload = "shared" if self.shared_loads else "plain"
        # With weights in textures their loads are cheap and x's dominate: 16 rows share each load of x (lavapipe,
        # ms, 8 / 16 rows: 65536 x 640 Q8_0 decode 57 / 54, 4096 x 640 Q5_0 over 33 tokens 49 / 37).
        # Weights left in buffers on such a device (those not in the split layout) keep 8: their loads are what
        # 8 rows were measured against, and 16 rows cost 4.5 times the compile (lavapipe's JIT, at the first
        # dispatch: a Q3_K gated prefill kernel of 8 rows x 8 tokens 19 s, of 16 rows 88 s).
        rows = 16 if self.weight_textures and textures is not False else 8
        if tokens == 1:
            return MatmulTile(rows=rows, tokens=1, wg=8, xload=xload)
        return MatmulTile(rows=rows, tokens=4 if tokens <= 4 else 8, wg=8, xload=xload)

    def attention_splits(self, rows: int, invocations: int, max_context: int, kernel: str = "invocation") -> int:
        """Ranges each token's positions are cut into (attention.wgsl), for `invocations` per token and range (its
        query heads, or groups of them for the grouped kernel). On CPU emulators a range of 128 positions per
        invocation (32 for the grouped kernel, which has a quarter of the invocations or fewer), at most 8: there a
        split only pays once it spreads real work over the cores, and every extra split costs a partial record and
        the combine pass (which one split skips). Measured on lavapipe, 30 layers of SmolLM2 decode attention (ms)
        by splits 1 / 2 / 8 / 64: at 64 positions 3.6 / 4.0 / 6.6 / 11.4, at 256 16.3 / 10.6 / 12.7 / 26.6, at
        2000 72 / 64 / 59 / 68; grouped, 26 layers of Gemma 3 (4 heads, one kv head) at 64 / 256 / 512 positions,
        one range per 128 vs 32 positions: 61.9 / 136.1 / 177.6 vs 44.8 / 79.7 / 136.7.
        Ranges never exceed SOFTWARE_MAX_RANGE positions, prefill included: on lavapipe (Mesa 22.3) invocations
        over 256-wide heads that walk more than about 475 positions end early without writing their output (seen
        with Gemma 3; 128-wide heads were fine up to 2000), so long prefill chunks are cut too."""
        if not self.software:
            # Enough ranges to occupy the device when few tokens run (decode), one when tokens alone do (prefill),
            # never ranges shorter than ATTN_MIN_RANGE positions of the longest context.
            by_work = -(-ATTN_PARALLEL // (rows * invocations))
            return max(1, min(by_work, -(-max_context // ATTN_MIN_RANGE), 64))
        positions = ATTN_MIN_RANGE if kernel == "grouped" else 128
        by_work = min(8, -(-max_context // (positions * rows)))
        return max(1, by_work, -(-max_context // SOFTWARE_MAX_RANGE))

    def attention_kernel(self, mode: str = "prefill") -> str:
        """The attention kernel (ATTENTION_KERNELS) for "decode" or "prefill" steps.

        GPUs: flash, whose workgroups load each K/V row once per kv group and tile of tokens, coalesced, and keep
        scores and tiles in workgroup memory. CPU emulators, where every storage or workgroup memory load is a
        scalar loop over the SIMD lanes and flash re-reads q and the tile from workgroup memory for every score:
        grouped for prefill, one invocation per (token, heads of a kv group, range), which loads each K/V row once
        for its heads and keeps no workgroup memory; scores for decode, wherever its scores fit (SCORES_MAX_SPAN
        positions, one binding; ops.attention takes grouped past that): its invocations hold no private arrays,
        which CPU emulators keep in memory and gather from, and a short context's positions spread over every SIMD
        lane. In prefill every token's invocations re-read the V rows, and grouped wins or comes close.
        Measured on lavapipe (tools/bench/attention_speed.py, ms for all layers), invocation vs flash (f32 cache): SmolLM2
        decode at 64 / 512 / 2000 positions 3.4 / 17 / 59 vs 20 / 530 / 4600, 64-token prefill 80 vs 4900; Gemma 3
        decode at 2000 positions 300 vs 3300, prefill 1150 vs 4500. Grouped vs invocation (f16 cache, each with its
        own ranges): Gemma 3 decode at 64 / 512 / 2000 positions 44.8 / 136.7 / 465.5 vs 51.2 / 335.3 / 1259.0,
        prefill of 33 and 64 tokens 408 / 415 vs 580 / 1018; SmolLM2 decode 19.9 / 117.2 / 404.4 vs 27.0 / 177.3 /
        423.5, prefill 201 / 366 vs 332 / 598. Grouped vs scores (f16 cache): Gemma 3 decode at 16 / 64 / 128 / 512
        / 2000 positions 19.9 / 41.1 / 53.9 / 138.5 / 437.2 vs 6.5 / 12.6 / 23.5 / 89.7 / 346.2, SmolLM2 8.3 /
        21.0 / 39.2 / 119.7 / 396.3 vs 5.2 / 12.1 / 22.5 / 76.1 / 292.1; prefill of 33 tokens, Gemma 3 162 vs 147,
        SmolLM2 71 vs 123."""
        if not self.software:
            return "flash"
        return "scores" if mode == "decode" else "grouped"

    def attention_candidates(self, mode: str = "prefill") -> list[str]:
        """The attention kernels a tuner may time on this adapter for `mode`, the hand-picked one first (each runs
        with its own split rule; `ops.attention(kernel=..., splits=...)` forces any)."""
        first = self.attention_kernel(mode)
        return [first] + [k for k in ATTENTION_KERNELS if k != first]

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

    def gated_delta_form(self, tokens: int) -> str:
        """The gated delta kernel (GATED_DELTA_FORMS) for a program of `tokens` tokens: "token" for decode (one
        token a sequence has nothing to chunk), "chunk" for prefill on every adapter class. Measured on lavapipe
        (tools/bench/gated_delta_speed.py, Qwen3.5-0.8B's 16 heads of 128, one layer, a 512-token prompt, CPU ms): chunk
        in 64-token steps 2274, in one step 2605; token kernel in 64-token steps 11676, one token a step 11871."""
        return self.choice("gated_delta", "decode" if tokens == 1 else "prefill",
                           "token" if tokens == 1 else "chunk")

    @property
    def gated_delta_rows(self) -> int:
        """State rows each lane of the chunked gated delta kernel owns. CPU emulators: 8, so each load from
        workgroup memory serves eight rows (measured on lavapipe at that shape, 64 tokens: rows 4 / 8 390 / 285
        CPU ms).
        GPUs: 1, the most lanes (head size x heads x sequences) and the least private memory per lane."""
        return 8 if self.software else 1

    def gated_delta_window(self, head_dim: int) -> int:
        """Chunks of each sequence one dispatch of the chunked gated delta kernel walks (0: all). CPU emulators:
        lavapipe ends an invocation early, without an error, once its loops have run about 65535 iterations; at
        head size 128 the chunked kernel lost every token after the 12th chunk (384) of a 512-token step (the
        token kernel after 126), so a window of 512 / head_dim chunks (4 at 128) leaves a threefold margin."""
        return max(1, 512 // head_dim) if self.software else 0

    @property
    def split_weights(self) -> bool:
        """Whether weights of the types that have one are rewritten into the split layout after upload
        (tensors.split_weight): on CPU emulators, where it turns 5-9 scalar loads per block into 1-2 vector loads
        and a word or two, and K-quant scales into ready f32 words (decode matvec 576 x 1536 on lavapipe, G
        multiply-adds/s: Q4_1 2.9 -> 3.8, Q4_K 0.59 -> 3.4, Q6_K 0.38 -> 3.2)."""
        return self.software

    @property
    def weight_textures(self) -> bool:
        """Whether split-layout weights are then copied into textures and read from there
        (shaders/weights_texture.wgsl): on CPU emulators whose device offers it, unless $LLMCHAT_WEIGHT_TEXTURES
        is "0". lavapipe turns each storage-buffer load into a scalar loop over the SIMD lanes but fetches texels as
        vector gathers: streaming 128 MiB ran at 0.73 GB/s from a buffer and 5.2 GB/s from a texture, and the
        131072 x 640 Q8_0 decode matvec went from 148 to 48 ms."""
        return self.split_weights and self.textures and os.environ.get(TEXTURES_ENV, "1") != "0"

    @property
    def fuse_gated(self) -> bool:
        """Whether a gated unit's gate and up weights are stacked so one matmul kernel (MODE 2) computes the unit,
        or kept apart: two plain matmuls and glu.wgsl, two more dispatches a layer but no kernel of its own. Apart
        only on adapters whose compiler is what a load waits for: SwiftShader in Chromium compiles pipelines one at
        a time and keeps none between pages, and the gated prefill tile was its slowest (SmolLM2 Q4_1, seconds to
        compile the 8 x 8 prefill tiles: store 2.0, add 2.3, gated 3.4). tools/bench/browser_bench.py there, two rounds
        stacked / apart: cold load 13.6 / 11.4 and 14.5 / 10.9 s (compiling 8.3-9.3 / 5.4-5.5 s), warm 8.9 / 8.3
        and 13.1 / 8.9 s, first token of a 33-token prompt 2.0 / 2.5 and 2.0 / 2.3 s after the load, so from page
        open to first token 1.7-3.4 s sooner cold and 0.1-4.0 s warm; but prefill runs 11-20% slower (16.5 / 13.1
        and 16.3 / 14.6 tok/s: x is loaded and normed twice) and decode 2-5% (4.49 / 4.39, 4.49 / 4.28)."""
        return not self.serial_compiler

    @property
    def fold_norms(self) -> bool:
        """Whether RMSNorm folds into the next projection (its sum of squares is accumulated from the blocks of x
        the matmul loads anyway). Always, now that CPU emulators reuse each load of x across many rows: there it
        saves two dispatches per layer."""
        return True


@dataclass
class TuneCase:
    """One choice the tuner (tune.py) makes: which of `candidates` runs `family` for `key` on this adapter.

    `candidates[0]` is what the fixed table (Variants) picks: it is always timed, and the reference every other
    candidate's output must match (|a - b| <= 1e-4 * max|b| + 1e-5). `shape` says what is measured (it is part of
    the cache key: "576x1536 T=1"). `trial(choice, n)` records `n` back-to-back dispatches of `choice` and returns
    (program, output buffer, output bytes); the tuner runs it, reads the output and times further runs. A choice
    must have a stable repr: the cache stores it by repr and uses it again only if a candidate has the same one.
    The tuned choice lands in Variants.tuned[(family, key)], read back with Variants.choice(family, key, default).
    """

    family: str
    key: str
    shape: str
    candidates: list
    trial: Callable


# Kernel families the tuner measures: name -> function(ctx) returning that family's TuneCases for one model, where
# ctx (tune.TuneContext) holds the device, kernels, variants, the model's uploaded weights by name, its config and
# the prefill step size. tune.py registers "matmul" (cases "matvec" and "prefill" per weight type in use); another
# family (attention ranges, ...) adds its own with `register_tunable` and reads its choice with Variants.choice.
TUNABLE: dict[str, Callable[[object], list[TuneCase]]] = {}


def register_tunable(family: str, cases: Callable[[object], list[TuneCase]]) -> None:
    """Let the tuner choose among variants of `family` (see TUNABLE)."""
    TUNABLE[family] = cases


_cache: weakref.WeakKeyDictionary[Device, Variants] = weakref.WeakKeyDictionary()
TEXTURES_ENV = "LLMCHAT_WEIGHT_TEXTURES"
MAX_TEXTURE_ROWS = 8192  # WebGPU's default maxTextureDimension2D, which every device has


def variants(device: Device) -> Variants:
    """The variants for `device`, probing it once (the subgroup size needs one tiny dispatch)."""
    v = _cache.get(device)
    if v is None:
        info = device.info
        width = subgroup_size(device)
        # A binding's worth of weights must fit one texture.
        textures = device.textures and info.max_binding_size <= MAX_TEXTURE_ROWS * TEXTURE_ROW_BYTES
        v = _cache[device] = Variants(software=info.software, shared_loads=info.software and width >= 8,
                                      subgroup_width=width, int8_dot=info.dot4i8, textures=textures,
                                      serial_compiler=serial_compiler(info))
    return v


def planned(info: AdapterInfo) -> Variants:
    """The variants a plan for an adapter described by `info` assumes, without a device to probe: those that decide
    what is uploaded and which activations exist."""
    return Variants(software=info.software, shared_loads=False, serial_compiler=serial_compiler(info))


def serial_compiler(info: AdapterInfo) -> bool:
    """Whether the adapter is SwiftShader, whose pipelines compile one at a time (see Variants.fuse_gated)."""
    return "swiftshader" in f"{info.name} {info.vendor}".lower()


def subgroup_size(device: Device) -> int:
    """The subgroup size compute shaders run with on `device` (0 without subgroups)."""
    if not device.info.subgroups:
        return 0
    out = device.buffer(16, "subgroup_size")
    kernel = Kernels(device).get("subgroup_size.wgsl")
    device.run(device.program([Dispatch(kernel, (out,), (1, 1, 1))]))
    return int.from_bytes(device.read(out, 0, 4), "little")
