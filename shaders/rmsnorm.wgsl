// y[t, seg] = x[t, seg] / sqrt(mean(x[t, seg]^2) + eps) * g for every segment `seg` of `dim` elements.
// A token row holds `groups` consecutive segments starting at column `offset`: one segment is the usual
// whole-row norm, several are per-head norms. Segments from `split` on take their weight from g2 instead of g, so
// the q and k heads of a token (adjacent in its qkv row, each with its own norm weight) take one dispatch, not two:
// on CPU emulators every dispatch costs tens of microseconds whatever its size.
// One workgroup normalises one segment of one token. Each invocation sums the squares of a strided share and
// leaves it in workgroup memory; after a single barrier every invocation adds up all the shares itself, in the
// same order, so it needs one barrier instead of a log2(WG) tree (barriers are what CPU emulators pay for).
// WEIGHTS counts the weights in use: 0, g and g2 are stand-ins and every weight counts as 1 (Gemma 4's value norm
// has no weight); 1, g only (g2 is never read); 2, g before `split` and g2 from there on.
// With SRC = y the kernel works in place: `x` is never read (a stand-in buffer is bound there).
// With ADD the result is added into y instead of stored: a norm on a branch's output before it joins the residual
// stream (Gemma's post-attention and post-feed-forward norms).
//!include token_order.wgsl

struct Params {
    dim: u32,       // elements per segment (the length of g)
    groups: u32,    // segments per token
    offset: u32,    // column of x and y where segment 0 starts, in elements
    x_stride: u32,  // elements between consecutive tokens in x
    y_stride: u32,  // elements between consecutive tokens in y
    eps: f32,       // added to the mean square
    split: u32,     // WEIGHTS 2: the first segment normalised with g2
}

struct Step {
    n_tokens: u32,  // tokens in this step
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<f32>;  // a stand-in when normalising in place
@group(0) @binding(5) var<storage, read> g2: array<f32>;  // a stand-in unless WEIGHTS is 2

const WG: u32 = {{WG}}u;
const ADD: bool = {{ADD}};
const WEIGHTS: u32 = {{WEIGHTS}}u;

var<workgroup> shares: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = step_token(wid.y, nwg.y);
    if (t >= step.n_tokens) {
        return;  // uniform across the workgroup, so no invocation is left waiting at the barrier
    }
    let src = t * p.x_stride + p.offset + wid.x * p.dim;
    let dst = t * p.y_stride + p.offset + wid.x * p.dim;
    var ss = 0.0;
    for (var i = lid; i < p.dim; i += WG) {
        let v = {{SRC}}[src + i];
        ss += v * v;
    }
    shares[lid] = ss;
    workgroupBarrier();
    var total = 0.0;
    for (var j = 0u; j < WG; j++) {
        total += shares[j];
    }
    let r = inverseSqrt(total / f32(p.dim) + p.eps);
    for (var i = lid; i < p.dim; i += WG) {
        var v = {{SRC}}[src + i] * r;
        if (WEIGHTS == 1u || (WEIGHTS == 2u && wid.x < p.split)) {
            v *= g[i];
        } else if (WEIGHTS == 2u) {
            v *= g2[i];
        }
        if (ADD) {
            y[dst + i] += v;
        } else {
            y[dst + i] = v;
        }
    }
}
