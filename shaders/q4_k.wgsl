// Q4_K: 256 weights in 144 bytes, in 8 sub-blocks of 32 (sub-block s is weights 32s..32s+31).
//   bytes  0..1    d, f16 multiplier of the sub-block scales
//   bytes  2..3    dmin, f16 multiplier of the sub-block mins
//   bytes  4..15   eight 6-bit scales and eight 6-bit mins, packed as k_scales.wgsl describes
//   bytes 16..143  qs[128], 4-bit quants: sub-block s is the low nibbles (s even) or the high nibbles (s odd)
//                  of qs[32(s / 2) .. 32(s / 2) + 31], weight l of the sub-block in byte 32(s / 2) + l
// Weight l of sub-block s is (d * scale_s) * q - dmin * min_s, q in 0..15.
//!include common.wgsl
//!include split_quants.wgsl
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

// Split layout (rows_split.wgsl): per sub-block, the nibbles as one vec4<u32> (split_quants.wgsl) and side words
// holding its scale d * scale_s and offset -dmin * min_s as f32 (exact: an f16 times a 6-bit integer), decoded
// once at repack time instead of from the 12-byte field for every row and block.
const SPLIT_QV: u32 = 1u;
const SPLIT_SW: u32 = 2u;
const SPLIT_HALF_SCALES: bool = false;

fn split_quant(b: u32, sub: u32, j: u32) -> u32 {
    let q0 = b + 16u + 32u * (sub / 2u) + 4u * j;
    return nibble_word(w_u32(q0), w_u32(q0 + 16u), 4u * (sub % 2u));
}

fn split_side(b: u32, sub: u32, j: u32) -> u32 {
    let dm = unpack2x16float(w_u32(b));
    let sm = k_scale_min(b + 4u, sub);
    return bitcast<u32>(select(-(dm.y * sm.y), dm.x * sm.x, j == 0u));
}

// The raw nibbles of the sub-block whose quants are split_quad(q) and whose side words start at word s into wv; returns
// its scale and offset.
fn dequant_split(q: u32, s: u32) -> vec4<f32> {
    split_nibbles(split_quad(q));
    let side = bitcast<vec2<f32>>(side_pair(s));
    let a = side.x;
    let c = side.y;
    return vec4<f32>(a, a, c, c);
}
