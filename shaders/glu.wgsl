// gate[t, c] = act(gate[t, c]) * up[t, up_offset + c]: the gated unit when gate and up are computed by separate
// matmuls; `up` may be a column range of wider rows (Gemma 4 multiplies by one layer's share of its per-layer
// inputs, all layers' held side by side).
//!include activation.wgsl

struct Params {
    cols: u32,       // elements per row of gate
    up_stride: u32,  // elements between consecutive tokens in up
    up_offset: u32,  // column of up that column 0 of gate is multiplied by
    _pad0: u32,
}

struct Step {
    n_tokens: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read_write> gate: array<f32>;
@group(0) @binding(3) var<storage, read> up: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let t = gid.y;
    if (c >= p.cols || t >= step.n_tokens) {
        return;
    }
    let i = t * p.cols + c;
    gate[i] = gate_act(gate[i]) * up[t * p.up_stride + p.up_offset + c];
}
