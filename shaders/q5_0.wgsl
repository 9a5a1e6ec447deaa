// Q5_0: 32 weights in 22 bytes.
//   bytes 0..1   d, f16 scale
//   bytes 2..5   qh, a little-endian u32: bit j is the fifth (high) bit of weight j
//   bytes 6..21  qs[16], low four bits: weight j < 16 in the low nibble of qs[j], weight j + 16 in its high nibble
// Weight j is ((low bits | bit j of qh << 4) - 16) * d.
//!include common.wgsl
//!include split_quants.wgsl

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 22u;

// Decode the 32 weights of sub-block `sub` (always 0 here) of the block at byte `b` into `wv`.
fn dequant_sub(b: u32, sub: u32) {
    let d = w_f16(b);
    let qh = w_u32(b + 2u);
    for (var j = 0u; j < 4u; j++) {
        let q = w_u32(b + 6u + 4u * j);
        let lo = (q & 0x0f0f0f0fu) | (spread4(qh >> (4u * j)) << 4u);
        let hi = ((q >> 4u) & 0x0f0f0f0fu) | (spread4(qh >> (16u + 4u * j)) << 4u);
        wv[j] = (bytes4(lo) - 16.0) * d;
        wv[4u + j] = (bytes4(hi) - 16.0) * d;
    }
}

// Split layout (rows_split.wgsl): the low four bits as one vec4<u32> (split_quants.wgsl); side words (fifth bits
// in the order fifth_bits_by_word makes, d in the low half of the second word).
const SPLIT_QV: u32 = 1u;
const SPLIT_SW: u32 = 2u;
const SPLIT_HALF_SCALES: bool = false;

fn split_quant(b: u32, sub: u32, j: u32) -> u32 {
    return w_u32(b + 6u + 4u * j);
}

fn split_side(b: u32, sub: u32, j: u32) -> u32 {
    return select(w_u16(b), fifth_bits_by_word(w_u32(b + 2u)), j == 0u);
}

// The raw 5-bit values of the block whose quants are split_quad(q) and whose side words start at word s into wv;
// returns d, -16 d.
fn dequant_split(q: u32, s: u32) -> vec4<f32> {
    let side = side_pair(s);
    split_nibbles5(split_quad(q), side.x);
    let d = unpack2x16float(side.y).x;
    return vec4<f32>(d, d, -16.0 * d, -16.0 * d);
}
