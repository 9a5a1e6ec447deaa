// Q4_K: 256 weights in 144 bytes, in 8 sub-blocks of 32 (sub-block s is weights 32s..32s+31).
//   bytes  0..1    d, f16 multiplier of the sub-block scales
//   bytes  2..3    dmin, f16 multiplier of the sub-block mins
//   bytes  4..15   eight 6-bit scales and eight 6-bit mins, packed as k_scales.wgsl describes
//   bytes 16..143  qs[128], 4-bit quants: sub-block s is the low nibbles (s even) or the high nibbles (s odd)
//                  of qs[32(s / 2) .. 32(s / 2) + 31], weight l of the sub-block in byte 32(s / 2) + l
// Weight l of sub-block s is (d * scale_s) * q - dmin * min_s, q in 0..15.
//!include common.wgsl
//!include k_scales.wgsl

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 144u;

fn dequant_sub(b: u32, sub: u32) {
    let dm = unpack2x16float(w_u32(b));
    let sm = k_scale_min(b + 4u, sub);
    let a = dm.x * sm.x;
    let c = dm.y * sm.y;
    let q0 = b + 16u + 32u * (sub / 2u);
    let shift = 4u * (sub % 2u);
    for (var j = 0u; j < 8u; j++) {
        let q = (w_u32(q0 + 4u * j) >> shift) & 0x0f0f0f0fu;
        wv[j] = bytes4(q) * a - c;
    }
}
