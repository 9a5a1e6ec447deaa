// IQ4_XS: 256 weights in 136 bytes, in 8 sub-blocks of 32 with 6-bit scales; weights index IQ4_NL's grid.
//   bytes  0..1    d, f16 multiplier of the sub-block scales
//   bytes  2..3    scales_h, u16: bits 2s..2s+1 are the top two bits of sub-block s's scale
//   bytes  4..7    scales_l[4]: the low four bits of sub-block s's scale are nibble s % 2 of scales_l[s / 2]
//   bytes  8..135  qs[128]: sub-block s is qs[16 s .. 16 s + 15], weight j < 16 in the low nibble of byte j,
//                  weight j + 16 in its high nibble
// Weight j of sub-block s is (d * (scale_s - 32)) * IQ4_GRID[index j], scale_s in 0..63.
// 136-byte blocks start at a multiple of 4 (rows are whole blocks).
//!include common.wgsl
//!include split_quants.wgsl
//!include iq4_grid.wgsl

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 136u;

// The scale d * (scale_s - 32) of sub-block `sub` of the block at byte `b`.
fn iq4_xs_scale(b: u32, sub: u32) -> f32 {
    let lo = (w_u8(b + 4u + sub / 2u) >> (4u * (sub % 2u))) & 15u;
    let hi = (w_u16(b + 2u) >> (2u * sub)) & 3u;
    return w_f16(b) * f32(i32(lo | (hi << 4u)) - 32);
}

fn dequant_sub(b: u32, sub: u32) {
    let a = iq4_xs_scale(b, sub);
    let q0 = (b >> 2u) + 2u + 4u * sub;
    for (var j = 0u; j < 4u; j++) {
        let q = w[q0 + j];
        wv[j] = iq4_values(q) * a;
        wv[4u + j] = iq4_values(q >> 4u) * a;
    }
}

// Split layout (rows_split.wgsl): the grid values themselves as bytes (split_quants.wgsl), looked up once at
// repack time, and the sub-block's scale as an f32 side word (exact: an f16 times a 6-bit integer).
const SPLIT_QV: u32 = 2u;
const SPLIT_SW: u32 = 1u;
const SPLIT_HALF_SCALES: bool = false;

fn split_quant(b: u32, sub: u32, j: u32) -> u32 {
    return iq4_bytes(w[(b >> 2u) + 2u + 4u * sub + j % 4u] >> (4u * (j / 4u)));
}

fn split_side(b: u32, sub: u32, j: u32) -> u32 {
    return bitcast<u32>(iq4_xs_scale(b, sub));
}

// The grid values of the sub-block whose quants are split_quad(q), split_quad(q + 1) and whose scale is side_word(s)
// into wv; returns the scale.
fn dequant_split(q: u32, s: u32) -> vec4<f32> {
    split_bytes(q);
    let a = bitcast<f32>(side_word(s));
    return vec4<f32>(a, a, 0.0, 0.0);
}
