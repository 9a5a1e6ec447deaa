// y[t, y_offset + r] = sum_k W[r, k] * x[t, k] for every output r < n and token t < step.n_tokens.
// W is a weight of GGUF quant blocks (rows as in the file or in the split layout: LAYOUT, below). One invocation
// computes a tile of R outputs for TT tokens: each 32-element block of x is read once for R rows and each block of
// W decoded once for TT tokens.
// Tiles are chosen per adapter (llmchat/gpu/variants.py): R = 1 on GPUs, where many invocations hide memory
// latency; R = 8 on CPU emulators (16 where weights are read from textures), where every storage load is a scalar
// loop over the SIMD lanes and reusing x across rows is what pays. TT = 1 for decode, 4 or 8 for prefill.
// MODE 0 stores, MODE 1 adds into y (the residual stream), MODE 2 is the gated unit: W holds the gate rows, then
// at `glu_rows` the up rows, and y = act(gate . x) * (up . x) (activation.wgsl).
// NORM folds the RMSNorm that precedes a projection into it: W . (x / rms(x) * g) = (W . (x * g)) / rms(x). The
// sum of squares is accumulated from the blocks of x as they are loaded, so the fold costs one FMA per element.
// XLOAD chooses how blocks of x are loaded (matmul_x_plain.wgsl, matmul_x_shared.wgsl), LAYOUT how rows of W are
// stored (rows_gguf.wgsl: as in the file; rows_split.wgsl: quants and scales apart, for aligned vector loads), DOT
// how a block of W meets a block of x (matmul_dot_f32.wgsl: decoded to f32; matmul_dot_i8.wgsl: raw quants times x
// rounded to 8 bits, four products at a time by dot4I8Packed).
//
// SHAPE says how invocations share the work (the main function comes from matmul_main_<SHAPE>.wgsl):
// - lanes: one invocation per tile, looping over all of k (what CPU emulators want, see variants.py);
// - rowgroup: a workgroup per tile of R rows x TT tokens, its invocations taking every WG-th 32-element block of
//   the row, so neighbouring invocations read neighbouring blocks of the same row (coalesced loads on GPUs), then
//   summing their partial sums (matmul_reduce_<REDUCE>.wgsl: subgroupAdd, or a tree in workgroup memory);
// - tiled: a workgroup per tile of R*WGR rows x TT*(WG/WGR) tokens; each step it decodes one block of every row of
//   the tile into workgroup memory once and every invocation reuses it for its TT tokens.
// Rows of an invocation's tile are r0 + r * ROW_STEP and tokens t0 + t * TOK_STEP (steps other than 1 only in the
// tiled shape, where they keep neighbouring invocations on neighbouring words of workgroup memory). The template
// writes the multiplications (the value ROW_STEP is " * 16u", or nothing): with steps of 1 multiplied in, even as
// literals, lavapipe ran the lanes kernel 10% slower.
//
// The loops over the tile's rows and tokens are unrolled by hand (R and TT are constants, and `if (R > 4u)` on a
// constant costs nothing): lavapipe's compiler leaves such loops rolled, and private arrays indexed by a loop
// counter then live in memory. Unrolled, the decode matvec ran 1.5x faster there.
//!include matmul_x_{{XLOAD}}.wgsl
//!include {{QUANT}}.wgsl
//!include rows_{{LAYOUT}}.wgsl
//!include activation.wgsl
//!include matmul_dot_{{DOT}}.wgsl

struct Params {
    k: u32,            // row length of W and of x, in elements (a multiple of 32)
    n: u32,            // outputs this dispatch writes (rows of W, or of the gate half in MODE 2)
    row_bytes: u32,    // bytes per row of W
    x_stride: u32,     // elements between consecutive tokens in x (a multiple of 4)
    y_stride: u32,     // elements between consecutive tokens in y
    y_offset: u32,     // column of y that output 0 lands in
    glu_rows: u32,     // MODE 2: the row of W where the up half starts
    bias_offset: u32,  // element of `bias` that belongs to output 0 (when HAS_BIAS)
    eps: f32,          // NORM: added to the mean square of x
    _pad: u32,
}

struct Step {
    n_tokens: u32,     // tokens in this step (the program is recorded for a maximum)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read> norm: array<vec4<f32>>;  // NORM: the RMSNorm weight g, k elements
// Binding 7: W again, as vec4s or as a texture, for the split layout (weights_<WEIGHTS>.wgsl, QUADS = 7).
//!include weights_{{WEIGHTS}}.wgsl

const R: u32 = {{R}}u;    // rows per invocation: 1, 2, 4, 8 or 16 (16 only in the lanes shape)
const TT: u32 = {{TT}}u;  // tokens per invocation: 1, 4 or 8
const MODE: u32 = {{MODE}}u;
const HAS_BIAS: bool = {{BIAS}};
const NORM: bool = {{NORM}};
const XQ8: bool = {{XQ8}};  // round x to 8 bits per block as llama.cpp does before its quantized dot products
const GLU_ALIGNED: bool = {{GLU_ALIGNED}};  // MODE 2: the up half starts at a multiple of 4 rows
const HALVES: u32 = 1u + MODE / 2u;  // MODE 2 accumulates the gate and the up half

var<private> wv: array<vec4<f32>, 8>;       // the decoded block of one row (written by dequant_sub)
var<private> xv: array<vec4<f32>, 8 * TT>;  // the current block of x for each token of the tile (times g: NORM)
var<private> gv: array<vec4<f32>, 8>;       // NORM: the current block of g
var<private> acc: array<f32, HALVES * R * TT>;  // [half][row][token]
var<private> ss: array<f32, TT>;            // NORM: sum of x^2 per token
var<private> xsum: array<vec4<f32>, TT>;    // per token, sums of the current block of x: (first half, second half, all, 0)
var<private> starts: array<RowStart, HALVES * R>;  // where each row of the tile starts (row_start), [half][row]

// Context of the current invocation, set once in main.
var<private> r0: u32;
var<private> t0: u32;
var<private> lane_id: u32;

// Loads the block of x at element k0 for tile token t (clamped to the step's tokens).
fn load_token(t: u32, k0: u32) {
    let token = min(t0 + t{{TOK_STEP}}, step.n_tokens - 1u);
    load_x(t, (token * p.x_stride + k0) >> 2u, lane_id);
    let o = 8u * t;
    if (NORM) {
        let s = xv[o] * xv[o] + xv[o + 1u] * xv[o + 1u] + xv[o + 2u] * xv[o + 2u] + xv[o + 3u] * xv[o + 3u]
              + xv[o + 4u] * xv[o + 4u] + xv[o + 5u] * xv[o + 5u] + xv[o + 6u] * xv[o + 6u] + xv[o + 7u] * xv[o + 7u];
        ss[t] += s.x + s.y + s.z + s.w;
        xv[o] *= gv[0];
        xv[o + 1u] *= gv[1];
        xv[o + 2u] *= gv[2];
        xv[o + 3u] *= gv[3];
        xv[o + 4u] *= gv[4];
        xv[o + 5u] *= gv[5];
        xv[o + 6u] *= gv[6];
        xv[o + 7u] *= gv[7];
    }
    finish_x(t);  // matmul_dot_<DOT>.wgsl: XQ8's rounding and the block's sums, or its 8-bit integers
}


// The block of x at xv[o..o+8) as llama.cpp's Q8_0 holds it: 32 integers round(x / d) in [-127, 127] times d as
// f16, with d = max|x| / 127 (x8_scale). Scaling a block does not change its integers, so with NORM it may run
// before 1/rms is applied. The int8 dot products (matmul_dot_i8.wgsl) keep the same integers and scale apart.
fn round_x8(o: u32) {
    let d = x8_scale(o);
    if (d == 0.0) {
        return;
    }
    let d16 = f16_round(d);
    for (var i = 0u; i < 8u; i++) {
        xv[o + i] = round(xv[o + i] / d) * d16;
    }
}

// max|x| / 127 over the block of x at xv[o..o+8): the step of its 8-bit integers (0 for an all-zero block).
fn x8_scale(o: u32) -> f32 {
    var m = abs(xv[o]);
    for (var i = 1u; i < 8u; i++) {
        m = max(m, abs(xv[o + i]));
    }
    return max(max(m.x, m.y), max(m.z, m.w)) / 127.0;
}

// `v` rounded to the nearest f16 (the precision llama.cpp stores an 8-bit block's scale in).
fn f16_round(v: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

fn load_tokens(k0: u32) {
    load_token(0u, k0);
    if (TT > 1u) {
        load_token(1u, k0);
        load_token(2u, k0);
        load_token(3u, k0);
    }
    if (TT > 4u) {
        load_token(4u, k0);
        load_token(5u, k0);
        load_token(6u, k0);
        load_token(7u, k0);
    }
}

// Token t's xsum (through a parameter: naga rejects constant indices past the end even in branches that TT rules
// out, such as xsum[1] when TT = 1).
fn block_sum(t: u32) -> vec4<f32> {
    return xsum[t];
}

// Accumulates the decoded block (block_dot: matmul_dot_<DOT>.wgsl) into accumulator row a (= half * R + tile row)
// for every token of the tile.
fn accumulate(a: u32, s: vec4<f32>) {
    let o = a * TT;
    acc[o] += block_dot(0u, s);
    if (TT > 1u) {
        acc[o + 1u] += block_dot(1u, s);
        acc[o + 2u] += block_dot(2u, s);
        acc[o + 3u] += block_dot(3u, s);
    }
    if (TT > 4u) {
        acc[o + 4u] += block_dot(4u, s);
        acc[o + 5u] += block_dot(5u, s);
        acc[o + 6u] += block_dot(6u, s);
        acc[o + 7u] += block_dot(7u, s);
    }
}

// Where tile row r starts (rows past the end read the last row; their results are dropped at the store).
fn start_row(r: u32) {
    let row = min(r0 + r{{ROW_STEP}}, p.n - 1u);
    starts[r] = row_start(row);
    if (MODE == 2u) {
        starts[R + r] = row_start(row + p.glu_rows);
    }
}

// Block i of accumulator row a (= half * R + tile row). A row that is not the first of its SIDE_ROWS
// (rows_<LAYOUT>.wgsl) reuses the side words its group's first row loaded: tiles start at a multiple of R, and
// in MODE 2 the up rows' groups line up only when GLU_ALIGNED.
fn row_block(a: u32, i: u32) {
    accumulate(a, decode(starts[a], i, (a % R) % SIDE_ROWS != 0u && (a < R || GLU_ALIGNED)));
}

// Block i of the tile's rows of one half (h = 1: the up rows of MODE 2), in order, so each group of SIDE_ROWS
// follows its first row.
fn half_block(h: u32, i: u32) {
    let a = h * R;
    row_block(a, i);
    if (R > 1u) {
        row_block(a + 1u, i);
    }
    if (R > 2u) {
        row_block(a + 2u, i);
        row_block(a + 3u, i);
    }
    if (R > 4u) {
        row_block(a + 4u, i);
        row_block(a + 5u, i);
        row_block(a + 6u, i);
        row_block(a + 7u, i);
    }
    if (R > 8u) {
        row_block(a + 8u, i);
        row_block(a + 9u, i);
        row_block(a + 10u, i);
        row_block(a + 11u, i);
        row_block(a + 12u, i);
        row_block(a + 13u, i);
        row_block(a + 14u, i);
        row_block(a + 15u, i);
    }
}

fn store(r: u32, t: u32) {
    let row = r0 + r{{ROW_STEP}};
    let token = t0 + t{{TOK_STEP}};
    if (row >= p.n || token >= step.n_tokens) {
        return;
    }
    var r_inv = 1.0;
    if (NORM) {
        r_inv = inverseSqrt(ss[t] / f32(p.k) + p.eps);
    }
    var b = 0.0;
    if (HAS_BIAS) {
        b = bias[p.bias_offset + row];
    }
    let o = token * p.y_stride + p.y_offset + row;
    let v = acc[r * TT + t] * r_inv;
    if (MODE == 0u) {
        y[o] = v + b;
    } else if (MODE == 1u) {
        y[o] += v + b;
    } else {
        y[o] = gate_act(v) * acc[(R + r) * TT + t] * r_inv;
    }
}

fn store_row(r: u32) {
    store(r, 0u);
    if (TT > 1u) {
        store(r, 1u);
        store(r, 2u);
        store(r, 3u);
    }
    if (TT > 4u) {
        store(r, 4u);
        store(r, 5u);
        store(r, 6u);
        store(r, 7u);
    }
}

fn start_rows() {
    start_row(0u);
    if (R > 1u) {
        start_row(1u);
    }
    if (R > 2u) {
        start_row(2u);
        start_row(3u);
    }
    if (R > 4u) {
        start_row(4u);
        start_row(5u);
        start_row(6u);
        start_row(7u);
    }
    if (R > 8u) {
        start_row(8u);
        start_row(9u);
        start_row(10u);
        start_row(11u);
        start_row(12u);
        start_row(13u);
        start_row(14u);
        start_row(15u);
    }
}

// Block i of x for the tile's tokens, times block i of each row of the tile.
fn tile_block(i: u32) {
    if (NORM) {
        load_g(i * 8u, lane_id);
    }
    load_tokens(i * 32u);
    half_block(0u, i);
    if (MODE == 2u) {
        half_block(1u, i);
    }
}

fn store_rows() {
    store_row(0u);
    if (R > 1u) {
        store_row(1u);
    }
    if (R > 2u) {
        store_row(2u);
        store_row(3u);
    }
    if (R > 4u) {
        store_row(4u);
        store_row(5u);
        store_row(6u);
        store_row(7u);
    }
    if (R > 8u) {
        store_row(8u);
        store_row(9u);
        store_row(10u);
        store_row(11u);
        store_row(12u);
        store_row(13u);
        store_row(14u);
        store_row(15u);
    }
}

// The entry point of this SHAPE (at the end: lavapipe ran the lanes kernel ~10% slower with it first).
//!include matmul_main_{{SHAPE}}.wgsl
