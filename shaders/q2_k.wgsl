// Q2_K: 256 weights in 84 bytes, in 16 groups of 16 (group g is weights 16g..16g+15).
//   bytes  0..15  scales[16]: byte g holds group g's scale in its low nibble and its min in its high nibble
//   bytes 16..79  qs[64], 2-bit quants: weight e = 128h + 32s + l (h in 0..1, s in 0..3, l in 0..31) is
//                 bits 2s..2s+1 of qs[32h + l]
//   bytes 80..81  d, f16 multiplier of the group scales
//   bytes 82..83  dmin, f16 multiplier of the group mins
// Weight e of group g is (d * scale_g) * q - dmin * min_g, q in 0..3.
// The 32-weight sub-block `sub` is groups 2 sub and 2 sub + 1: bit pair s = sub % 4 of the 32 bytes of half
// h = sub / 4. 84 bytes is a multiple of 4, but the decoder does not rely on it.
//!include common.wgsl

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 84u;

fn dequant_sub(b: u32, sub: u32) {
    let dm = unpack2x16float(w_u32(b + 80u));
    let scales = w_u16(b + 2u * sub);  // the bytes of groups 2 sub and 2 sub + 1
    let q0 = b + 16u + 32u * (sub / 4u);
    let shift = 2u * (sub % 4u);
    for (var g = 0u; g < 2u; g++) {
        let s = scales >> (8u * g);
        let a = dm.x * f32(s & 15u);
        let c = dm.y * f32((s >> 4u) & 15u);
        for (var j = 0u; j < 4u; j++) {
            let q = (w_u32(q0 + 16u * g + 4u * j) >> shift) & 0x03030303u;
            wv[4u * g + j] = bytes4(q) * a - c;
        }
    }
}
