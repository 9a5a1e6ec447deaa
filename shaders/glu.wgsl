// gate[t, c] = act(gate[t, c]) * up[t, c]: the gated unit when gate and up are computed by separate matmuls.
//!include activation.wgsl

struct Params {
    cols: u32,  // elements per row
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
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
    gate[i] = gate_act(gate[i]) * up[i];
}
