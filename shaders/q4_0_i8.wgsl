// Q4_0 (q4_0.wgsl) for int8 dot products (matmul_dot_i8.wgsl): the raw nibbles 0..15 as bytes; scales
// (d, d, -8 d, -8 d), the offset times the block's sum of x.

// Split layout: the quants are split_quad(q), d the low half of side_word(s).
fn int8_split(q: u32, s: u32) -> vec4<f32> {
    nibbles_i8(split_quad(q));
    let d = unpack2x16float(side_word(s)).x;
    return vec4<f32>(d, d, -8.0 * d, -8.0 * d);
}

// As stored: the block at (even) byte b.
fn int8_gguf(b: u32) -> vec4<f32> {
    nibbles_i8(vec4<u32>(w_u32(b + 2u), w_u32(b + 6u), w_u32(b + 10u), w_u32(b + 14u)));
    let d = w_f16(b);
    return vec4<f32>(d, d, -8.0 * d, -8.0 * d);
}
