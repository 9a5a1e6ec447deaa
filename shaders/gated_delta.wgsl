// The gated delta rule (Qwen3.5's linear-attention layers), one token after another per sequence: per value head h
// with state S_h (head_dim x head_dim, row j per value dimension), for each token
//     q, k = l2norm(q), l2norm(k)         x / sqrt(|x|^2 + eps), as llama.cpp normalises them
//     S_h = exp(g) * S_h                  g < 0: the decay, one per head and token
//     S_h[j] += beta * (v[j] - S_h[j] . k) * k
//     o[j] = (S_h[j] . q) * scale
// Value head h reads query/key head h % n_k_heads (llama.cpp tiles the key heads over the value heads).
//
// One invocation per value row j, head and sequence: rows are independent, so the state needs no barrier; the
// invocation walks its sequence's tokens in the step (contiguous, in position order). This is the decode form;
// a long prompt through it is a token-at-a-time loop, so prefill runs the chunked form (gated_delta_chunk.wgsl).
// A sequence at position 0 starts from a zero state, never reading what its slot held before.

struct Params {
    n_k_heads: u32,
    n_v_heads: u32,
    head_dim: u32,  // key and value head size
    qkv_stride: u32,  // elements between tokens in qkv: q (n_k_heads heads), k (n_k_heads), v (n_v_heads)
    gb_stride: u32,  // elements between tokens in gb: g (n_v_heads), then beta (n_v_heads)
    out_stride: u32,  // elements between tokens in out
    eps: f32,
    scale: f32,  // applied to q . S (1 / sqrt(head_dim))
}

struct Step {
    n_tokens: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> gb: array<f32>;
@group(0) @binding(4) var<storage, read> tokens: array<vec4<u32>>;  // (id, position, sequence slot, 0) per token
@group(0) @binding(5) var<storage, read_write> state: array<f32>;  // [slot][v head][row j][column i]
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

fn inv_norm(base: u32) -> f32 {
    var sum = 0.0;
    for (var i = 0u; i < p.head_dim; i++) {
        sum += qkv[base + i] * qkv[base + i];
    }
    return inverseSqrt(sum + p.eps);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x;
    let h = gid.y;
    let t0 = gid.z;
    if (j >= p.head_dim || h >= p.n_v_heads || t0 >= step.n_tokens) {
        return;
    }
    let slot = tokens[t0].z;
    if (t0 > 0u && tokens[t0 - 1u].z == slot) {
        return;  // not the first token of its sequence in this step
    }
    let d = p.head_dim;
    let row = ((slot * p.n_v_heads + h) * d + j) * d;
    if (tokens[t0].y == 0u) {
        for (var i = 0u; i < d; i++) {
            state[row + i] = 0.0;
        }
    }
    let kh = h % p.n_k_heads;
    var t = t0;
    loop {
        if (t >= step.n_tokens || tokens[t].z != slot) {
            break;
        }
        let qb = t * p.qkv_stride + kh * d;
        let kb = qb + p.n_k_heads * d;
        let vb = t * p.qkv_stride + 2u * p.n_k_heads * d + h * d;
        let qn = inv_norm(qb);
        let kn = inv_norm(kb);
        let decay = exp(gb[t * p.gb_stride + h]);
        let beta = gb[t * p.gb_stride + p.n_v_heads + h];
        var sk = 0.0;
        for (var i = 0u; i < d; i++) {
            let s = state[row + i] * decay;
            state[row + i] = s;
            sk += s * qkv[kb + i];
        }
        let delta = beta * (qkv[vb + j] - sk * kn);
        var o = 0.0;
        for (var i = 0u; i < d; i++) {
            let s = state[row + i] + qkv[kb + i] * kn * delta;
            state[row + i] = s;
            o += s * qkv[qb + i];
        }
        out[t * p.out_stride + h * d + j] = o * qn * p.scale;
        t++;
    }
}
