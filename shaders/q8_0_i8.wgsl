// Q8_0 (q8_0.wgsl) for int8 dot products (matmul_dot_i8.wgsl): the quants are signed bytes already, so a block's
// quant words go to wi as they are; scales (d, d, 0, 0).

// Split layout: the quants are split_quad(q), split_quad(q + 1), d the low half of side_word(s).
fn int8_split(q: u32, s: u32) -> vec4<f32> {
    let a = split_quad(q);
    let b = split_quad(q + 1u);
    wi[0] = a.x;
    wi[1] = a.y;
    wi[2] = a.z;
    wi[3] = a.w;
    wi[4] = b.x;
    wi[5] = b.y;
    wi[6] = b.z;
    wi[7] = b.w;
    let d = unpack2x16float(side_word(s)).x;
    return vec4<f32>(d, d, 0.0, 0.0);
}

// As stored: the block at byte b, read as dequant_sub reads it (nine words, either alignment).
fn int8_gguf(b: u32) -> vec4<f32> {
    let i = b >> 2u;
    let aligned = (b & 2u) != 0u;
    let w0 = w[i];
    let w1 = w[i + 1u];
    let w2 = w[i + 2u];
    let w3 = w[i + 3u];
    let w4 = w[i + 4u];
    let w5 = w[i + 5u];
    let w6 = w[i + 6u];
    let w7 = w[i + 7u];
    let w8 = w[i + 8u];
    wi[0] = q8_word(w0, w1, aligned);
    wi[1] = q8_word(w1, w2, aligned);
    wi[2] = q8_word(w2, w3, aligned);
    wi[3] = q8_word(w3, w4, aligned);
    wi[4] = q8_word(w4, w5, aligned);
    wi[5] = q8_word(w5, w6, aligned);
    wi[6] = q8_word(w6, w7, aligned);
    wi[7] = q8_word(w7, w8, aligned);
    let d = unpack2x16float(select(w0, w0 >> 16u, aligned)).x;
    return vec4<f32>(d, d, 0.0, 0.0);
}
