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
