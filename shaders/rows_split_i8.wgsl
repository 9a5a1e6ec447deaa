// decode_block for int8 dot products (matmul_dot_i8.wgsl), rows in the split layout (rows_split.wgsl): the type's
// int8_split (<type>_i8.wgsl) reads block i's quants and side words.
fn decode_block_i8(start: RowStart, i: u32, reuse: bool) -> vec4<f32> {
    let at = block_sides(start, i, reuse);
    return int8_split(at.x, at.y);
}
