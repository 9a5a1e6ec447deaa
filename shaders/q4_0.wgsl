// Q4_0: 32 weights in 18 bytes.
//   bytes 0..1   d, f16 scale
//   bytes 2..17  qs[16], two 4-bit quants per byte
// Weight j < 16 is ((qs[j] & 15) - 8) * d; weight j + 16 is ((qs[j] >> 4) - 8) * d.
// 18-byte blocks start at any even byte, so every word goes through `w_u32`.
//!include common.wgsl

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
