// Q3_K: 256 weights in 110 bytes, in 16 groups of 16 (group g is weights 16g..16g+15).
//   bytes   0..31   hmask[32]: bit i of hmask[l] is the high bit of weight 32i + l
//   bytes  32..95   qs[64], low 2 bits: weight e = 128h + 32s + l (h in 0..1, s in 0..3, l in 0..31) is
//                   bits 2s..2s+1 of qs[32h + l]
//   bytes  96..107  sixteen 6-bit group scales, stored with +32: group g's low four bits are the low nibble
//                   of byte 96 + g (g < 8) or the high nibble of byte 96 + g - 8 (g >= 8); its top two bits
//                   are bits 2(g / 4)..2(g / 4)+1 of byte 104 + g % 4
//   bytes 108..109  d, f16 multiplier of the group scales
// Weight e of group g is (d * (scale_g - 32)) * (q - 4 + 4 * hbit): a set hmask bit means no -4 offset, so
// the 3-bit value q + 4 hbit is read as unsigned and shifted down by 4.
// The 32-weight sub-block `sub` is groups 2 sub and 2 sub + 1, hmask bit `sub`, and bit pair s = sub % 4 of
// the qs bytes of half h = sub / 4. 110-byte blocks start at any even byte.
//!include common.wgsl

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 110u;

// Signed scale of group `g` of the block at byte `b`.
fn q3_scale(b: u32, g: u32) -> f32 {
    let lo = (w_u8(b + 96u + (g % 8u)) >> (4u * (g / 8u))) & 15u;
    let hi = (w_u8(b + 104u + (g % 4u)) >> (2u * (g / 4u))) & 3u;
    return f32(i32(lo | (hi << 4u)) - 32);
}

fn dequant_sub(b: u32, sub: u32) {
    let d = w_f16(b + 108u);
    let q0 = b + 32u + 32u * (sub / 4u);
    let shift = 2u * (sub % 4u);
    for (var g = 0u; g < 2u; g++) {
        let a = d * q3_scale(b, 2u * sub + g);
        for (var j = 0u; j < 4u; j++) {
            let o = 16u * g + 4u * j;
            let q = (w_u32(q0 + o) >> shift) & 0x03030303u;
            let h = (w_u32(b + o) >> sub) & 0x01010101u;
            wv[4u * g + j] = (bytes4(q | (h << 2u)) - 4.0) * a;
        }
    }
}
