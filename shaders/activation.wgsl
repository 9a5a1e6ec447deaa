// The gate's activation of a gated unit, chosen with {{ACT}}: 0 = SiLU (Llama, Qwen), 1 = GELU with the tanh
// approximation (Gemma), 2 = sigmoid (Qwen3.5's gated attention output), as llama.cpp computes them.

const ACT: u32 = {{ACT}}u;

fn gate_act(v: f32) -> f32 {
    if (ACT == 1u) {
        // tanh(z) as 1 - 2 / (exp(2z) + 1): exact limits where exp overflows to inf or underflows to 0
        let z = 0.7978845608028654 * (v + 0.044715 * v * v * v);
        return 0.5 * v * (2.0 - 2.0 / (exp(2.0 * z) + 1.0));
    }
    if (ACT == 2u) {
        return 1.0 / (1.0 + exp(-v));
    }
    return v / (1.0 + exp(-v));
}
