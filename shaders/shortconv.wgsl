// A depthwise causal convolution over the last L positions (its own included) of each channel, with a rolling
// per-sequence state. Two forms, chosen with the SILU constant:
// - LFM2's short convolution block, between its two projections: per channel c of token t at position p,
//       v[t] = b[t, c] * x[t, c]
//       y[t, c] = cg[t, c] * sum_k w[c, k] * v(p - (L - 1) + k)
//   gated by cg; bcx holds b, cg and x side by side per token (the input projection's output).
// - Qwen3.5's linear-attention layers (SILU): v[t] = x[t, c], the first n_embd columns of each input row (the mixed
//   q|k|v projection), and y[t, c] = silu(sum_k w[c, k] * v(p - (L - 1) + k)), as llama.cpp's ssm_conv then silu.
// v of positions before the step comes from the slot's state, the last L - 1 values of v per channel
// ([slot][L - 1][channel], oldest first), which the step then moves forward; positions before 0 are zeros, so a
// sequence starting at 0 never reads the state (no reset is needed).
//
// One invocation per channel and sequence runs along that sequence's tokens in the step (tokens of one sequence
// are contiguous and in position order), so the state is read before it is written without a second dispatch:
// decode steps and prefill chunks alike, several sequences per step.

struct Params {
    n_embd: u32,  // channels
    bcx_stride: u32,  // elements between tokens in bcx (3 * n_embd for LFM2; at least n_embd with SILU)
    y_stride: u32,  // elements between tokens in y
    _pad: u32,
}

struct Step {
    n_tokens: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> bcx: array<f32>;
@group(0) @binding(3) var<storage, read> tokens: array<vec4<u32>>;  // (id, position, sequence slot, 0) per token
@group(0) @binding(4) var<storage, read> conv: array<f32>;  // [channel][L] taps, the last one for the current token
@group(0) @binding(5) var<storage, read_write> state: array<f32>;  // [slot][L - 1][channel]
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

const L: u32 = {{L}}u;
const SILU: bool = {{SILU}};

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let t0 = gid.y;
    if (c >= p.n_embd || t0 >= step.n_tokens) {
        return;
    }
    let slot = tokens[t0].z;
    if (t0 > 0u && tokens[t0 - 1u].z == slot) {
        return;  // not the first token of its sequence in this step
    }
    let base = slot * (L - 1u) * p.n_embd + c;
    var win: array<f32, {{L}}>;  // v at positions p - L + 1 .. p
    for (var k = 0u; k < L - 1u; k++) {
        win[k] = select(0.0, state[base + k * p.n_embd], tokens[t0].y > 0u);
    }
    var w: array<f32, {{L}}>;
    for (var k = 0u; k < L; k++) {
        w[k] = conv[c * L + k];
    }
    var t = t0;
    loop {
        if (t >= step.n_tokens || tokens[t].z != slot) {
            break;
        }
        let row = t * p.bcx_stride;
        if (SILU) {
            win[L - 1u] = bcx[row + c];
        } else {
            win[L - 1u] = bcx[row + c] * bcx[row + 2u * p.n_embd + c];
        }
        var acc = 0.0;
        for (var k = 0u; k < L; k++) {
            acc += w[k] * win[k];
        }
        if (SILU) {
            y[t * p.y_stride + c] = acc / (1.0 + exp(-acc));
        } else {
            y[t * p.y_stride + c] = bcx[row + p.n_embd + c] * acc;
        }
        for (var k = 0u; k < L - 1u; k++) {
            win[k] = win[k + 1u];
        }
        t++;
    }
    for (var k = 0u; k < L - 1u; k++) {
        state[base + k * p.n_embd] = win[k];
    }
}
