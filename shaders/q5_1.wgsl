// Q5_1: 32 weights in 24 bytes.
//   bytes 0..1   d, f16 scale
//   bytes 2..3   m, f16 offset (the block minimum)
//   bytes 4..7   qh, a little-endian u32: bit j is the fifth (high) bit of weight j
//   bytes 8..23  qs[16], low four bits: weight j < 16 in the low nibble of qs[j], weight j + 16 in its high nibble
// Weight j is (low bits | bit j of qh << 4) * d + m.
//!include common.wgsl
//!include split_quants.wgsl

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 24u;

// Decode the 32 weights of sub-block `sub` (always 0 here) of the block at byte `b` into `wv`.
fn dequant_sub(b: u32, sub: u32) {
    let dm = unpack2x16float(w_u32(b));
    let qh = w_u32(b + 4u);
    for (var j = 0u; j < 4u; j++) {
        let q = w_u32(b + 8u + 4u * j);
        let lo = (q & 0x0f0f0f0fu) | (spread4(qh >> (4u * j)) << 4u);
        let hi = ((q >> 4u) & 0x0f0f0f0fu) | (spread4(qh >> (16u + 4u * j)) << 4u);
        wv[j] = bytes4(lo) * dm.x + dm.y;
        wv[4u + j] = bytes4(hi) * dm.x + dm.y;
    }
}

// Split layout (rows_split.wgsl): the low four bits as one vec4<u32> (split_quants.wgsl); side words (fifth bits
// in the order fifth_bits_by_word makes, then the (d, m) word).
const SPLIT_QV: u32 = 1u;
const SPLIT_SW: u32 = 2u;
const SPLIT_HALF_SCALES: bool = false;

fn split_quant(b: u32, sub: u32, j: u32) -> u32 {
    return w[(b >> 2u) + 2u + j];
}

fn split_side(b: u32, sub: u32, j: u32) -> u32 {
    return select(w[b >> 2u], fifth_bits_by_word(w[(b >> 2u) + 1u]), j == 0u);
}

// The raw 5-bit values of the block whose quants are split_quad(q) and whose side words start at word s into wv;
// returns d, m.
fn dequant_split(q: u32, s: u32) -> vec4<f32> {
    let side = side_pair(s);
    split_nibbles5(split_quad(q), side.x);
    let dm = unpack2x16float(side.y);
    return vec4<f32>(dm.x, dm.x, dm.y, dm.y);
}
