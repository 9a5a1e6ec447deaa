// Q4_1: 32 weights in 20 bytes: d (f16) at 0, m (f16) at 2, qs[16] at 4.
// Weight j < 16 is (qs[j] & 15) * d + m; weight j + 16 is (qs[j] >> 4) * d + m.
// Rows are whole blocks of 20 bytes, so every block starts at a word boundary and words are read directly.
// Unrolled by hand: lavapipe's compiler keeps even a four-step loop rolled (see matmul.wgsl).
//!include common.wgsl
//!include split_quants.wgsl

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 20u;

// Decode the 32 weights of sub-block `sub` (always 0 here) of the block at byte `b` into `wv`.
fn dequant_sub(b: u32, sub: u32) {
    let i = b >> 2u;
    let dm = unpack2x16float(w[i]);
    let q0 = w[i + 1u];
    let q1 = w[i + 2u];
    let q2 = w[i + 3u];
    let q3 = w[i + 4u];
    wv[0] = lo_nibbles(q0) * dm.x + dm.y;
    wv[1] = lo_nibbles(q1) * dm.x + dm.y;
    wv[2] = lo_nibbles(q2) * dm.x + dm.y;
    wv[3] = lo_nibbles(q3) * dm.x + dm.y;
    wv[4] = hi_nibbles(q0) * dm.x + dm.y;
    wv[5] = hi_nibbles(q1) * dm.x + dm.y;
    wv[6] = hi_nibbles(q2) * dm.x + dm.y;
    wv[7] = hi_nibbles(q3) * dm.x + dm.y;
}

// Split layout (rows_split.wgsl): the quants as one vec4<u32> (split_quants.wgsl), the (d, m) word as the side word.
const SPLIT_QV: u32 = 1u;
const SPLIT_SW: u32 = 1u;
const SPLIT_HALF_SCALES: bool = false;

fn split_quant(b: u32, sub: u32, j: u32) -> u32 {
    return w[(b >> 2u) + 1u + j];
}

fn split_side(b: u32, sub: u32, j: u32) -> u32 {
    return w[b >> 2u];
}

// The raw nibbles of the block whose quants are split_quad(q) and whose side word is side_word(s) into wv;
// returns d, m.
fn dequant_split(q: u32, s: u32) -> vec4<f32> {
    split_nibbles(split_quad(q));
    let dm = unpack2x16float(side_word(s));
    return vec4<f32>(dm.x, dm.x, dm.y, dm.y);
}
