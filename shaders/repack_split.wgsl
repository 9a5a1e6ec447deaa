// Rewrites rows of a GGUF weight of a 32-element block type into the split layout read by rows_split.wgsl:
// per row, the quant bytes of every block (p.quant_vec4s * 16 bytes from byte p.quant_offset of the block), then
// one scale word per block (the block's first p.scale_bytes bytes: f16 d, or the f16 pair d, m). One invocation
// moves one block. Runs once per weight after upload; the GGUF file stays the source of truth.
//!include common.wgsl

struct Params {
    blocks: u32,        // blocks per row
    rows: u32,          // rows to repack
    src_row_bytes: u32, // bytes per GGUF row
    dst_row_bytes: u32, // bytes per split row (a multiple of 16)
    block_bytes: u32,   // bytes per GGUF block
    scale_bytes: u32,   // 2 or 4: leading bytes of a block that form its scale word
    quant_offset: u32,  // byte of the block where its quants start (even)
    quant_vec4s: u32,   // 16-byte groups of quants per block
    src_row0: u32,      // first source row
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let id = gid.x + gid.y * nwg.x * 64u;
    let row = id / p.blocks;
    let i = id % p.blocks;
    if (row >= p.rows) {
        return;
    }
    let b = (p.src_row0 + row) * p.src_row_bytes + i * p.block_bytes;
    let dst = row * (p.dst_row_bytes >> 2u);
    let words = 4u * p.quant_vec4s;
    for (var j = 0u; j < words; j++) {
        out[dst + i * words + j] = w_u32(b + p.quant_offset + 4u * j);
    }
    var scale = w_u16(b);
    if (p.scale_bytes == 4u) {
        scale = w_u32(b);
    }
    out[dst + p.blocks * words + i] = scale;
}
