// Q8_0: 32 weights in 34 bytes: d (f16) at 0, qs[32] (int8) at 2. Weight j is qs[j] * d.
// A block starts at any even byte, so it spans the nine words from the one holding its first byte: either d in the
// low half of word 0 and the quants straddling word pairs, or d in the high half and the quants in words 1..8.
// The nine words are loaded once and both cases are formed without branching (see matmul.wgsl on unrolling).
//!include common.wgsl
//!include split_quants.wgsl

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 34u;

// Quant word j of a block whose words are a (= word j) and b (= word j + 1): straddling the pair unless `aligned`.
fn q8_word(a: u32, b: u32, aligned: bool) -> u32 {
    return select((a >> 16u) | (b << 16u), b, aligned);
}

fn dequant_sub(b: u32, sub: u32) {
    let i = b >> 2u;
    let aligned = (b & 2u) != 0u;  // d in the high half of word i: the quants start at word i + 1
    let w0 = w[i];
    let w1 = w[i + 1u];
    let w2 = w[i + 2u];
    let w3 = w[i + 3u];
    let w4 = w[i + 4u];
    let w5 = w[i + 5u];
    let w6 = w[i + 6u];
    let w7 = w[i + 7u];
    let w8 = w[i + 8u];
    let d = unpack2x16float(select(w0, w0 >> 16u, aligned)).x;
    wv[0] = sbytes4(q8_word(w0, w1, aligned)) * d;
    wv[1] = sbytes4(q8_word(w1, w2, aligned)) * d;
    wv[2] = sbytes4(q8_word(w2, w3, aligned)) * d;
    wv[3] = sbytes4(q8_word(w3, w4, aligned)) * d;
    wv[4] = sbytes4(q8_word(w4, w5, aligned)) * d;
    wv[5] = sbytes4(q8_word(w5, w6, aligned)) * d;
    wv[6] = sbytes4(q8_word(w6, w7, aligned)) * d;
    wv[7] = sbytes4(q8_word(w7, w8, aligned)) * d;
}

// Split layout (rows_split.wgsl): the quants as bytes (split_quants.wgsl), d in the low half of a side word.
const SPLIT_QV: u32 = 2u;
const SPLIT_SW: u32 = 1u;
const SPLIT_HALF_SCALES: bool = false;

fn split_quant(b: u32, sub: u32, j: u32) -> u32 {
    return w_u32(b + 2u + 4u * j);
}

fn split_side(b: u32, sub: u32, j: u32) -> u32 {
    return w_u16(b);
}

// The raw signed bytes of the block whose quants are split_quad(q), split_quad(q + 1) and whose side word is
// side_word(s) into wv; returns d.
fn dequant_split(q: u32, s: u32) -> vec4<f32> {
    split_bytes(q);
    let d = unpack2x16float(side_word(s)).x;
    return vec4<f32>(d, d, 0.0, 0.0);
}
