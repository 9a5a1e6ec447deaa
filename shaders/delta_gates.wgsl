// The per-head gates of Qwen3.5's gated delta rule, from the two small projections of the normed input, in place:
//     g    = a * softplus(alpha + dt_bias)   the log of the state's decay (a = -exp(A_log) as stored, so g < 0)
//     beta = sigmoid(beta)                   how much of the new value is written
// with softplus(x) = x above 20, else log(1 + exp(x)), as llama.cpp computes it.

struct Params {
    n_heads: u32,  // value heads: alpha and beta each hold one value per head
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct Step {
    n_tokens: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read_write> ab: array<f32>;  // [token][alpha (n_heads) | beta (n_heads)]
@group(0) @binding(3) var<storage, read> a: array<f32>;  // per head
@group(0) @binding(4) var<storage, read> dt_bias: array<f32>;  // per head

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let h = gid.x;
    let t = gid.y;
    if (h >= p.n_heads || t >= step.n_tokens) {
        return;
    }
    let i = t * 2u * p.n_heads + h;
    let x = ab[i] + dt_bias[h];
    ab[i] = a[h] * select(log(1.0 + exp(x)), x, x > 20.0);
    ab[i + p.n_heads] = 1.0 / (1.0 + exp(-ab[i + p.n_heads]));
}
