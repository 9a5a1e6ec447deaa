// Q8_0: 32 weights in 34 bytes: d (f16) at 0, qs[32] (int8) at 2. Weight j is qs[j] * d.
//!include common.wgsl

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 34u;

fn dequant_sub(b: u32, sub: u32) {
    let d = w_f16(b);
    for (var j = 0u; j < 8u; j++) {
        wv[j] = sbytes4(w_u32(b + 2u + 4u * j)) * d;
    }
}
