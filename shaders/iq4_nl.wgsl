// IQ4_NL: 32 weights in 18 bytes, 4-bit indices into a fixed non-linear grid of 16 signed values.
//   bytes 0..1   d, f16 scale
//   bytes 2..17  qs[16]: weight j < 16 is the low nibble of qs[j], weight j + 16 its high nibble
// Weight j is d * IQ4_GRID[index j]. 18-byte blocks start at any even byte, so every word goes through `w_u32`.
//!include common.wgsl
//!include split_quants.wgsl
//!include iq4_grid.wgsl

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 18u;

// Decode the 32 weights of sub-block `sub` (always 0 here) of the block at byte `b` into `wv`.
fn dequant_sub(b: u32, sub: u32) {
    let d = w_f16(b);
    for (var j = 0u; j < 4u; j++) {
        let q = w_u32(b + 2u + 4u * j);
        wv[j] = iq4_values(q) * d;
        wv[4u + j] = iq4_values(q >> 4u) * d;
    }
}

// Split layout (rows_split.wgsl): the grid values themselves as bytes (split_quants.wgsl), looked up once at
// repack time (a lookup per weight in the matmul would cost a load each), d in the low half of a side word.
const SPLIT_QV: u32 = 2u;
const SPLIT_SW: u32 = 1u;
const SPLIT_HALF_SCALES: bool = false;

fn split_quant(b: u32, sub: u32, j: u32) -> u32 {
    return iq4_bytes(w_u32(b + 2u + 4u * (j % 4u)) >> (4u * (j / 4u)));
}

fn split_side(b: u32, sub: u32, j: u32) -> u32 {
    return w_u16(b);
}

// The grid values of the block whose quants are split_quad(q), split_quad(q + 1) and whose side word is side_word(s)
// into wv; returns d.
fn dequant_split(q: u32, s: u32) -> vec4<f32> {
    split_bytes(q);
    let d = unpack2x16float(side_word(s)).x;
    return vec4<f32>(d, d, 0.0, 0.0);
}
