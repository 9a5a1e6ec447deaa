// Merges the per-range partial results of attention.wgsl into out[t, h] = sum_r e^(m_r - M) acc_r / sum_r
// e^(m_r - M) l_r, where M is the largest running max m_r over the token's ranges r (empty ranges carry m = -FLT_MAX,
// l = 0 and weigh nothing). One invocation writes four elements of one head of one token; it re-reads the few
// (m, l) pairs itself rather than sharing them through workgroup memory and a barrier.

struct Params {
    n_head: u32,      // query heads
    out_stride: u32,  // elements between consecutive tokens in out (a multiple of 4)
    n_splits: u32,    // partial records per (token, head)
}

struct Step {
    n_tokens: u32,  // tokens in this step
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> parts: array<vec4<f32>>;  // records as written by attention.wgsl
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

const HD4: u32 = {{HD4}}u;  // head_dim / 4
const REC: u32 = HD4 + 1u;  // vec4s per partial record

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.y;
    let h = gid.x / HD4;
    let i = gid.x % HD4;
    if (t >= step.n_tokens || h >= p.n_head) {
        return;
    }
    let first = (t * p.n_head + h) * p.n_splits * REC;
    var big_m = -3.4028234663852886e38;
    for (var r = 0u; r < p.n_splits; r++) {
        big_m = max(big_m, parts[first + r * REC].x);
    }
    var l = 0.0;
    var o = vec4<f32>(0.0);
    for (var r = 0u; r < p.n_splits; r++) {
        let ml = parts[first + r * REC];
        let w = exp(ml.x - big_m);
        l += ml.y * w;
        o += parts[first + r * REC + 1u + i] * w;
    }
    out[(t * p.out_stride) / 4u + h * HD4 + i] = o * select(0.0, 1.0 / l, l > 0.0);
}
