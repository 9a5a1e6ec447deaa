// Q4_1: 32 weights in 20 bytes: d (f16) at 0, m (f16) at 2, qs[16] at 4.
// Weight j < 16 is (qs[j] & 15) * d + m; weight j + 16 is (qs[j] >> 4) * d + m.
//!include common.wgsl

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 20u;

// Decode the 32 weights of sub-block `sub` (always 0 here) of the block at byte `b` into `wv`.
fn dequant_sub(b: u32, sub: u32) {
    let dm = unpack2x16float(w_u32(b));
    for (var j = 0u; j < 4u; j++) {
        let q = w_u32(b + 4u + 4u * j);
        wv[j] = lo_nibbles(q) * dm.x + dm.y;
        wv[4u + j] = hi_nibbles(q) * dm.x + dm.y;
    }
}
