// Q5_K: 256 weights in 176 bytes, in 8 sub-blocks of 32 (sub-block s is weights 32s..32s+31).
//   bytes  0..1    d, f16 multiplier of the sub-block scales
//   bytes  2..3    dmin, f16 multiplier of the sub-block mins
//   bytes  4..15   eight 6-bit scales and eight 6-bit mins, packed as k_scales.wgsl describes
//   bytes 16..47   qh[32]: bit s of qh[l] is the fifth (high) bit of weight l of sub-block s
//   bytes 48..175  qs[128], low 4 bits: sub-block s is the low nibbles (s even) or the high nibbles (s odd)
//                  of qs[32(s / 2) .. 32(s / 2) + 31], weight l of the sub-block in byte 32(s / 2) + l
// Weight l of sub-block s is (d * scale_s) * q - dmin * min_s, q = low | high << 4 in 0..31.
//!include common.wgsl
//!include split_quants.wgsl
//!include k_scales.wgsl

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 176u;

fn dequant_sub(b: u32, sub: u32) {
    let dm = unpack2x16float(w_u32(b));
    let sm = k_scale_min(b + 4u, sub);
    let a = dm.x * sm.x;
    let c = dm.y * sm.y;
    let q0 = b + 48u + 32u * (sub / 2u);
    let shift = 4u * (sub % 2u);
    for (var j = 0u; j < 8u; j++) {
        let lo = (w_u32(q0 + 4u * j) >> shift) & 0x0f0f0f0fu;
        let hi = (w_u32(b + 16u + 4u * j) >> sub) & 0x01010101u;
        wv[j] = bytes4(lo | (hi << 4u)) * a - c;
    }
}

// Split layout (rows_split.wgsl): per sub-block, the low four bits as one vec4<u32> (split_quants.wgsl) and four
// side words: the fifth bits (in the order fifth_bits_by_word makes), the scale d * scale_s and the offset
// -dmin * min_s as f32 (exact: an f16 times a 6-bit integer), and one unused word, so one vec4 load reads them.
const SPLIT_QV: u32 = 1u;
const SPLIT_SW: u32 = 4u;
const SPLIT_HALF_SCALES: bool = false;

fn split_quant(b: u32, sub: u32, j: u32) -> u32 {
    let q0 = b + 48u + 32u * (sub / 2u) + 4u * j;
    return nibble_word(w_u32(q0), w_u32(q0 + 16u), 4u * (sub % 2u));
}

fn split_side(b: u32, sub: u32, j: u32) -> u32 {
    if (j == 0u) {
        var bits = 0u;
        for (var e = 0u; e < 32u; e++) {
            bits |= ((w_u8(b + 16u + e) >> sub) & 1u) << e;
        }
        return fifth_bits_by_word(bits);
    }
    let dm = unpack2x16float(w_u32(b));
    let sm = k_scale_min(b + 4u, sub);
    return select(0u, bitcast<u32>(select(-(dm.y * sm.y), dm.x * sm.x, j == 1u)), j < 3u);
}

// The raw 5-bit values of the sub-block whose quants are split_quad(q) and whose side words are `sides` (s is their
// first word: the vec4's) into wv; returns its scale and offset.
fn dequant_split(q: u32, s: u32) -> vec4<f32> {
    split_nibbles5(split_quad(q), sides.x);
    let ac = bitcast<vec2<f32>>(sides.yz);
    return vec4<f32>(ac.x, ac.x, ac.y, ac.y);
}
