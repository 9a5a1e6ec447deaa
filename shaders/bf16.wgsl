// BF16: bfloat16 values, two per word: the upper half of an f32 (sign, 8-bit exponent, 7-bit mantissa), stored
// little-endian, 2 bytes per element. Element j of a 32-element run starting at byte b is the 16 bits at
// b + 2j shifted into the top of an f32; decoded 32 at a time like a block type.
//!include common.wgsl

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 64u;

fn dequant_sub(b: u32, sub: u32) {
    for (var j = 0u; j < 8u; j++) {
        let lo = w_u32(b + 8u * j);
        let hi = w_u32(b + 8u * j + 4u);
        wv[j] = bitcast<vec4<f32>>(vec4<u32>(lo << 16u, lo & 0xffff0000u, hi << 16u, hi & 0xffff0000u));
    }
}
