// Q4_1 (q4_1.wgsl) for int8 dot products (matmul_dot_i8.wgsl): the raw nibbles 0..15 as bytes; scales
// (d, d, m, m), the min times the block's sum of x.

// Split layout: the quants are split_quad(q), (d, m) the word side_word(s).
fn int8_split(q: u32, s: u32) -> vec4<f32> {
    nibbles_i8(split_quad(q));
    let dm = unpack2x16float(side_word(s));
    return vec4<f32>(dm.x, dm.x, dm.y, dm.y);
}

// As stored: the block at byte b (a multiple of 4).
fn int8_gguf(b: u32) -> vec4<f32> {
    let i = b >> 2u;
    nibbles_i8(vec4<u32>(w[i + 1u], w[i + 2u], w[i + 3u], w[i + 4u]));
    let dm = unpack2x16float(w[i]);
    return vec4<f32>(dm.x, dm.x, dm.y, dm.y);
}
