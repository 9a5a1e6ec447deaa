// Rows of W as GGUF stores them: row `row` starts at byte row * p.row_bytes and holds its blocks back to back.
// The including shader has `p.row_bytes`; the type's decoder (shaders/<type>.wgsl) provides `dequant_sub`.

// Where row `row` starts, for decode_block: its first byte.
fn row_start(row: u32) -> u32 {
    return row * p.row_bytes;
}

// Decode the 32 weights of sub-block i of the row starting at byte `start` into wv; returns (scale, offset) =
// (1, 0): wv holds the weights themselves.
fn decode_block(start: u32, i: u32) -> vec2<f32> {
    let subs = BLOCK_ELEMS / 32u;
    dequant_sub(start + (i / subs) * BLOCK_BYTES, i % subs);
    return vec2<f32>(1.0, 0.0);
}
