// y[t, y_offset + r] = sum_k W[r, k] * x[t, k] for every output r < n and token t < step.n_tokens.
// W is a GGUF weight (rows of quant blocks, exactly as stored); one invocation computes one output for a tile of
// TT tokens, so each block is decoded once and used TT times (TT = 1 for decode, larger for prefill).
// MODE 0 stores, MODE 1 adds into y (the residual stream), MODE 2 is the gated unit: W holds the gate rows, then
// at `glu_rows` the up rows, and y = silu(gate . x) * (up . x).
// NORM folds the RMSNorm that precedes a projection into it: W . (x / rms(x) * g) = (W . (x * g)) / rms(x). Every
// invocation reads the whole row of x for its dot product anyway, so summing x^2 on the way costs one FMA per
// element and saves a dispatch (and a round trip of the normed row through memory).
//!include {{QUANT}}.wgsl

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

const TT: u32 = {{TT}}u;
const MODE: u32 = {{MODE}}u;
const HAS_BIAS: bool = {{BIAS}};
const NORM: bool = {{NORM}};

var<private> wv: array<vec4<f32>, 8>;

fn dot32(t: u32, k0: u32) -> f32 {
    let base = (t * p.x_stride + k0) >> 2u;
    var s = vec4<f32>(0.0);
    for (var j = 0u; j < 8u; j++) {
        if (NORM) {
            s += wv[j] * x[base + j] * norm[(k0 >> 2u) + j];
        } else {
            s += wv[j] * x[base + j];
        }
    }
    return s.x + s.y + s.z + s.w;
}

// 1 / rms of token t's row of x (NORM), summed in the same order by every invocation so all agree exactly.
fn inv_rms(t: u32) -> f32 {
    let base = (t * p.x_stride) >> 2u;
    var s = vec4<f32>(0.0);
    for (var j = 0u; j < p.k / 4u; j++) {
        let v = x[base + j];
        s += v * v;
    }
    return inverseSqrt((s.x + s.y + s.z + s.w) / f32(p.k) + p.eps);
}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    let t0 = gid.y * TT;
    if (r >= p.n || t0 >= step.n_tokens) {
        return;
    }
    let tn = min(TT, step.n_tokens - t0);
    var acc: array<f32, TT>;
    var acc_up: array<f32, TT>;
    let subs = BLOCK_ELEMS / 32u;
    for (var i = 0u; i < p.k / 32u; i++) {
        let block = (i / subs) * BLOCK_BYTES;
        dequant_sub(r * p.row_bytes + block, i % subs);
        for (var t = 0u; t < tn; t++) {
            acc[t] += dot32(t0 + t, i * 32u);
        }
        if (MODE == 2u) {
            dequant_sub((r + p.glu_rows) * p.row_bytes + block, i % subs);
            for (var t = 0u; t < tn; t++) {
                acc_up[t] += dot32(t0 + t, i * 32u);
            }
        }
    }
    var b = 0.0;
    if (HAS_BIAS) {
        b = bias[p.bias_offset + r];
    }
    for (var t = 0u; t < tn; t++) {
        if (NORM) {
            let r_inv = inv_rms(t0 + t);
            acc[t] *= r_inv;
            acc_up[t] *= r_inv;
        }
        let o = (t0 + t) * p.y_stride + p.y_offset + r;
        if (MODE == 0u) {
            y[o] = acc[t] + b;
        } else if (MODE == 1u) {
            y[o] += acc[t] + b;
        } else {
            y[o] = silu(acc[t]) * acc_up[t];
        }
    }
}
