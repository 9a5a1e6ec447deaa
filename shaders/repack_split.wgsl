// Rewrites rows of a GGUF weight into the split layout that rows_split.wgsl reads, using its addressing. What
// the words hold is the type's choice: its shader file ({{QUANT}}.wgsl) makes quant word j and side word j of
// sub-block `sub` of the GGUF block at byte b with `split_quant(b, sub, j)` and `split_side(b, sub, j)`. One
// invocation moves one 32-element block. Runs once per weight after upload; the GGUF file stays the source of truth.
//!include {{QUANT}}.wgsl
//!include rows_split.wgsl

struct Params {
    k: u32,             // elements per row (a multiple of 32)
    w_rows: u32,        // rows to repack: the rows of the destination binding
    src_row_bytes: u32, // bytes per GGUF row
    row_bytes: u32,     // bytes per split row
    src_row0: u32,      // source row of the first one
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
// Binding 3: the type's split decoders, included with its repack functions, read through these; bound (to the
// source) but never read here (weights_buffer.wgsl, QUADS = 3).
//!include weights_buffer.wgsl
var<private> wv: array<vec4<f32>, 8>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let id = gid.x + gid.y * nwg.x * 64u;
    let blocks = p.k / 32u;
    let row = id / blocks;
    let i = id % blocks;
    if (row >= p.w_rows) {
        return;
    }
    let subs = BLOCK_ELEMS / 32u;
    let b = (p.src_row0 + row) * p.src_row_bytes + (i / subs) * BLOCK_BYTES;
    let sub = i % subs;
    let at = block_at(row_start(row), i);
    for (var j = 0u; j < 4u * SPLIT_QV; j++) {
        out[4u * at.x + j] = split_quant(b, sub, j);
    }
    for (var j = 0u; j < SPLIT_SW; j++) {
        out[at.y + j] = split_side(b, sub, j);
    }
}
