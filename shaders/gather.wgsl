// y[i, :] = x[rows[i], :] for i < out.n_rows: copies the token rows whose logits are wanted (the last token of each
// sequence in a step, or every token when all logits are asked for) so the output projection runs on those only.

struct Params {
    cols: u32,  // elements per row of x and y
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct OutStep {
    n_rows: u32,  // rows to gather in this step
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> out: OutStep;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> rows: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let i = gid.y;
    if (c >= p.cols || i >= out.n_rows) {
        return;
    }
    y[i * p.cols + c] = x[rows[i] * p.cols + c];
}
