// F32: plain little-endian floats; decoded 32 at a time like a block type.
//!include common.wgsl

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 128u;

fn dequant_sub(b: u32, sub: u32) {
    let i = b >> 2u;
    for (var j = 0u; j < 8u; j++) {
        let k = i + 4u * j;
        wv[j] = bitcast<vec4<f32>>(vec4<u32>(w[k], w[k + 1u], w[k + 2u], w[k + 3u]));
    }
}
