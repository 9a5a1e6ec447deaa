// F16: IEEE half floats, two per word; decoded 32 at a time like a block type.
//!include common.wgsl

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 64u;

fn dequant_sub(b: u32, sub: u32) {
    for (var j = 0u; j < 8u; j++) {
        let lo = unpack2x16float(w_u32(b + 8u * j));
        let hi = unpack2x16float(w_u32(b + 8u * j + 4u));
        wv[j] = vec4<f32>(lo, hi);
    }
}
