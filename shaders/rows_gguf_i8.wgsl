// decode_block for int8 dot products (matmul_dot_i8.wgsl), rows as GGUF stores them (rows_gguf.wgsl): the type's
// int8_gguf (<type>_i8.wgsl) reads block i from its first byte (32-element blocks only).
fn decode_block_i8(start: RowStart, i: u32, reuse: bool) -> vec4<f32> {
    return int8_gguf(start + i * BLOCK_BYTES);
}
