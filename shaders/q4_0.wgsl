// Q4_0: 32 weights in 18 bytes.
//   bytes 0..1   d, f16 scale
//   bytes 2..17  qs[16], two 4-bit quants per byte
// Weight j < 16 is ((qs[j] & 15) - 8) * d; weight j + 16 is ((qs[j] >> 4) - 8) * d.
// 18-byte blocks start at any even byte, so every word goes through `w_u32`.
//!include common.wgsl
//!include split_quants.wgsl

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 18u;

// Decode the 32 weights of sub-block `sub` (always 0 here) of the block at byte `b` into `wv`.
fn dequant_sub(b: u32, sub: u32) {
    let d = w_f16(b);
    for (var j = 0u; j < 4u; j++) {
        let q = w_u32(b + 2u + 4u * j);
        wv[j] = (lo_nibbles(q) - 8.0) * d;
        wv[4u + j] = (hi_nibbles(q) - 8.0) * d;
    }
}

// Split layout (rows_split.wgsl): the quants as one vec4<u32> (split_quants.wgsl), d in the low half of a side word.
const SPLIT_QV: u32 = 1u;
const SPLIT_SW: u32 = 1u;
const SPLIT_HALF_SCALES: bool = false;

fn split_quant(b: u32, sub: u32, j: u32) -> u32 {
    return w_u32(b + 2u + 4u * j);
}

fn split_side(b: u32, sub: u32, j: u32) -> u32 {
    return w_u16(b);
}

// The raw nibbles of the block whose quants are split_quad(q) and whose side word is side_word(s) into wv;
// returns d, -8 d.
fn dequant_split(q: u32, s: u32) -> vec4<f32> {
    split_nibbles(split_quad(q));
    let d = unpack2x16float(side_word(s)).x;
    return vec4<f32>(d, d, -8.0 * d, -8.0 * d);
}
