// Rows of W as GGUF stores them: row `row` starts at byte row * p.row_bytes and holds its blocks back to back.
// The including shader has `p.row_bytes`; the type's decoder (shaders/<type>.wgsl) provides `dequant_sub`.

// Whether the two halves of a block have scales of their own (see rows_split.wgsl): not here, wv is final.
const HALF_SCALES: bool = false;

// Rows share no side words here (see rows_split.wgsl).
const SIDE_ROWS: u32 = 1u;

// Where a row starts: its first byte.
alias RowStart = u32;

fn row_start(row: u32) -> RowStart {
    return row * p.row_bytes;
}

// Decode the 32 weights of sub-block i of the row starting at byte `start` into wv; returns (1, 1, 0, 0): wv
// holds the weights themselves (rows_split.wgsl gives the meaning). `reuse` means nothing here (no side words).
fn decode_block(start: RowStart, i: u32, reuse: bool) -> vec4<f32> {
    let subs = BLOCK_ELEMS / 32u;
    dequant_sub(start + (i / subs) * BLOCK_BYTES, i % subs);
    return vec4<f32>(1.0, 1.0, 0.0, 0.0);
}
