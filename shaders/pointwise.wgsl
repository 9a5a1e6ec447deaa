// In-place maps of every element of the first n rows of an activation, n being the first u32 of `count` (the step's
// token count, or its logits rows). MODE picks the map:
// 0: y *= s[0], a scalar held in a GPU buffer (Gemma 4's per-layer output scale, a one-element tensor);
// 1: y = cap * tanh(y / cap) (Gemma's final logit soft-capping).

struct Params {
    cols: u32,  // elements per row
    _pad0: u32,
    _pad1: u32,
    cap: f32,   // MODE 1: the soft cap (> 0)
}

struct Count {
    n_rows: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> count: Count;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> s: array<f32>;  // MODE 0: the scale; a stand-in otherwise

const MODE: u32 = {{MODE}}u;

// tanh(z) as 1 - 2 / (exp(2z) + 1): exact limits where exp overflows to inf or underflows to 0 (activation.wgsl)
fn tanh_limits(z: f32) -> f32 {
    return 1.0 - 2.0 / (exp(2.0 * z) + 1.0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let r = gid.y;
    if (c >= p.cols || r >= count.n_rows) {
        return;
    }
    let i = r * p.cols + c;
    if (MODE == 0u) {
        y[i] *= s[0];
    } else {
        y[i] = p.cap * tanh_limits(y[i] / p.cap);
    }
}
