// y[t, :] = the row of the embedding table W for the token id of token t, decoded to f32 (and multiplied by `scale`,
// which some architectures use). One invocation decodes 32 elements of one token's row. LAYOUT is how rows of W
// are stored (rows_gguf.wgsl, rows_split.wgsl): a table tied to the output projection takes the matmul's layout.

//!include {{QUANT}}.wgsl
//!include rows_{{LAYOUT}}.wgsl

struct Params {
    k: u32,          // row length (embedding size), in elements (a multiple of 32)
    row_bytes: u32,  // bytes per row of W
    row_start: u32,  // first row (token id) held by this part of W; tables larger than one binding are split
    w_rows: u32,     // rows held by this part
    scale: f32,      // multiplier applied to every element
}

struct Step {
    n_tokens: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> tokens: array<vec4<u32>>;  // (id, position, sequence, 0) per token
@group(0) @binding(4) var<storage, read_write> y: array<vec4<f32>>;
// Binding 5: W again, as vec4s or as a texture, for the split layout (weights_<WEIGHTS>.wgsl, QUADS = 5).
//!include weights_{{WEIGHTS}}.wgsl

var<private> wv: array<vec4<f32>, 8>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;  // 32-element chunk of the row
    let t = gid.y;
    if (i >= p.k / 32u || t >= step.n_tokens) {
        return;
    }
    let id = tokens[t].x - p.row_start;  // wraps around for ids below this part
    if (id >= p.w_rows) {
        return;  // another part holds this row (ids are checked on the host)
    }
    let s = decode_block(row_start(id), i, false) * p.scale;
    let o = (t * p.k + i * 32u) >> 2u;
    for (var j = 0u; j < 8u; j++) {
        y[o + j] = wv[j] * select(s.x, s.y, j >= 4u) + select(s.z, s.w, j >= 4u);
    }
}
