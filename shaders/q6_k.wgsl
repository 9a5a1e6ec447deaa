// Q6_K: 256 weights in 210 bytes, in 16 groups of 16 (group g is weights 16g..16g+15).
//   bytes   0..127  ql[128], low 4 bits: weight e = 128h + 64n + m (h, n in 0..1, m in 0..63) is the low
//                   nibble (n = 0) or the high nibble (n = 1) of ql[64h + m]
//   bytes 128..191  qh[64], high 2 bits: weight e = 128h + 32s + l (s in 0..3, l in 0..31) is
//                   bits 2s..2s+1 of qh[32h + l]
//   bytes 192..207  scales[16], one signed byte per group
//   bytes 208..209  d, f16 multiplier of the group scales
// Weight e of group g is (d * scales[g]) * (q - 32), q = low | high << 4 in 0..63.
// The 32-weight sub-block `sub` is groups 2 sub and 2 sub + 1; with h = sub / 4 its low bits are nibble
// n = (sub / 2) % 2 of ql[64h + 32(sub % 2) + l] and its high bits pair s = sub % 4 of qh[32h + l].
// 210-byte blocks start at any even byte.
//!include common.wgsl
//!include split_quants.wgsl

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 210u;

fn dequant_sub(b: u32, sub: u32) {
    let d = w_f16(b + 208u);
    let scales = w_u16(b + 192u + 2u * sub);  // the signed bytes of groups 2 sub and 2 sub + 1
    let h = sub / 4u;
    let ql = b + 64u * h + 32u * (sub % 2u);
    let qh = b + 128u + 32u * h;
    let lo_shift = 4u * ((sub / 2u) % 2u);
    let hi_shift = 2u * (sub % 4u);
    for (var g = 0u; g < 2u; g++) {
        let a = d * f32(bitcast<i32>(scales << (24u - 8u * g)) >> 24u);
        for (var j = 0u; j < 4u; j++) {
            let o = 16u * g + 4u * j;
            let lo = (w_u32(ql + o) >> lo_shift) & 0x0f0f0f0fu;
            let hi = (w_u32(qh + o) >> hi_shift) & 0x03030303u;
            wv[4u * g + j] = (bytes4(lo | (hi << 4u)) - 32.0) * a;
        }
    }
}

// Split layout (rows_split.wgsl): per 32-weight sub-block, the low four bits as one vec4<u32> (split_quants.wgsl)
// and four side words: two words of high bit pairs, then the scales d * scales[g] of its two groups as f32 (exact:
// an f16 times an 8-bit integer). High pair word k holds nibble words n = 4k..4k+3, the pair of weight 4n + b at
// bits 8b + 2(n % 4). The -32 becomes each half's offset, applied to the sum of x as Q4_1's minimum is.
const SPLIT_QV: u32 = 1u;
const SPLIT_SW: u32 = 4u;
const SPLIT_HALF_SCALES: bool = true;

fn split_quant(b: u32, sub: u32, j: u32) -> u32 {
    let ql = b + 64u * (sub / 4u) + 32u * (sub % 2u) + 4u * j;
    return nibble_word(w_u32(ql), w_u32(ql + 16u), 4u * ((sub / 2u) % 2u));
}

fn split_side(b: u32, sub: u32, j: u32) -> u32 {
    if (j < 2u) {
        let qh = b + 128u + 32u * (sub / 4u);
        var h = 0u;
        for (var n = 0u; n < 4u; n++) {
            for (var c = 0u; c < 4u; c++) {
                let pair = (w_u8(qh + 16u * j + 4u * n + c) >> (2u * (sub % 4u))) & 3u;
                h |= pair << (8u * c + 2u * n);
            }
        }
        return h;
    }
    let scale = bitcast<i32>(w_u8(b + 192u + 2u * sub + j - 2u) << 24u) >> 24u;
    return bitcast<u32>(w_f16(b + 208u) * f32(scale));
}

// The values q of the sub-block whose quants are split_quad(q) and whose side words are `sides` (s is their first
// word: the vec4's) into wv; returns the scales of its two halves and their offsets, -32 times the scales.
fn dequant_split(q: u32, s: u32) -> vec4<f32> {
    let v = split_quad(q);
    let lo = 0x0f0f0f0fu;
    let m = 0x30303030u;
    wv[0] = bytes4((v.x & lo) | ((sides.x << 4u) & m));
    wv[1] = bytes4((v.y & lo) | ((sides.x << 2u) & m));
    wv[2] = bytes4((v.z & lo) | (sides.x & m));
    wv[3] = bytes4((v.w & lo) | ((sides.x >> 2u) & m));
    wv[4] = bytes4(((v.x >> 4u) & lo) | ((sides.y << 4u) & m));
    wv[5] = bytes4(((v.y >> 4u) & lo) | ((sides.y << 2u) & m));
    wv[6] = bytes4(((v.z >> 4u) & lo) | (sides.y & m));
    wv[7] = bytes4(((v.w >> 4u) & lo) | ((sides.y >> 2u) & m));
    let a = bitcast<vec2<f32>>(sides.zw);
    return vec4<f32>(a, -32.0 * a);
}
