// Rows of W in the split layout (llmchat/gpu/tensors.py `split_weight`, written once after upload by
// repack_split.wgsl): a row is p.row_bytes bytes, a multiple of 16, holding first the quants of every block as
// SPLIT_QV vec4<u32> each, then one scale word per block. Every block then costs SPLIT_QV vec4 loads and one word
// instead of 5 to 9 words at arbitrary even offsets; on CPU emulators, where each load is a loop over the SIMD
// lanes, that made the decode matvec 1.4x faster. The including shader binds the weight twice, as `w` (words) and
// `wq` (vec4s); the type's decoder provides SPLIT_QV and `dequant_split`.

// Where row `row` starts, for decode_block: its first vec4.
fn row_start(row: u32) -> u32 {
    return row * (p.row_bytes >> 4u);
}

// The raw quants of block i of the row starting at `start` into wv; returns (scale, offset) with
// weight = scale * raw + offset, which the caller applies once per block and token instead of once per weight.
fn decode_block(start: u32, i: u32) -> vec2<f32> {
    return dequant_split(start + i * SPLIT_QV, (start + (p.k >> 5u) * SPLIT_QV) * 4u + i);
}
