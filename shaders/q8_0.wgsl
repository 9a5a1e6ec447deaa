// Q8_0: 32 weights in 34 bytes: d (f16) at 0, qs[32] (int8) at 2. Weight j is qs[j] * d.
// A block starts at any even byte, so it spans the nine words from the one holding its first byte: either d in the
// low half of word 0 and the quants straddling word pairs, or d in the high half and the quants in words 1..8.
// The nine words are loaded once and both cases are formed without branching (see matmul.wgsl on unrolling).
//!include common.wgsl

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

// Split layout (rows_split.wgsl): quants as two vec4<u32> per block, d in the low half of a word apart.
const SPLIT_QV: u32 = 2u;

// The raw signed bytes of the block whose quants are wq[q], wq[q + 1] and whose d is in w[s] into wv; returns (d, 0).
fn dequant_split(q: u32, s: u32) -> vec2<f32> {
    let a = wq[q];
    let b = wq[q + 1u];
    wv[0] = sbytes4(a.x);
    wv[1] = sbytes4(a.y);
    wv[2] = sbytes4(a.z);
    wv[3] = sbytes4(a.w);
    wv[4] = sbytes4(b.x);
    wv[5] = sbytes4(b.y);
    wv[6] = sbytes4(b.z);
    wv[7] = sbytes4(b.w);
    return vec2<f32>(unpack2x16float(w[s]).x, 0.0);
}
