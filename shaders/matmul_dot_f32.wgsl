// How matmul.wgsl multiplies a block of W by a block of x (DOT f32): W decoded to f32 (wv), x in f32 (rounded to 8
// bits first under XQ8, as llama.cpp's numbers have it).

// The block of W to multiply: decode_block's (rows_<LAYOUT>.wgsl), into wv.
fn decode(start: RowStart, i: u32, reuse: bool) -> vec4<f32> {
    return decode_block(start, i, reuse);
}

// Token t's block of x is in xv: XQ8's rounding, then its sums for the blocks' offsets.
fn finish_x(t: u32) {
    let o = 8u * t;
    if (XQ8) {
        round_x8(o);
    }
    let lo = xv[o] + xv[o + 1u] + xv[o + 2u] + xv[o + 3u];
    let hi = xv[o + 4u] + xv[o + 5u] + xv[o + 6u] + xv[o + 7u];
    let lo_sum = lo.x + lo.y + lo.z + lo.w;
    let hi_sum = hi.x + hi.y + hi.z + hi.w;
    xsum[t] = vec4<f32>(lo_sum, hi_sum, lo_sum + hi_sum, 0.0);
}

// The decoded block (wv) times token t's block of x.
fn dot32(t: u32) -> f32 {
    let o = 8u * t;
    let s = wv[0] * xv[o] + wv[1] * xv[o + 1u] + wv[2] * xv[o + 2u] + wv[3] * xv[o + 3u]
          + wv[4] * xv[o + 4u] + wv[5] * xv[o + 5u] + wv[6] * xv[o + 6u] + wv[7] * xv[o + 7u];
    return s.x + s.y + s.z + s.w;
}

// Token t's block of x times the decoded block, with the block's scales and offsets s = (a, b, c, d) from
// decode_block: a * (first half) + c * (sum of its x) + b * (second half) + d * (sum of its x). Types whose halves
// share a scale and offset take one 32-element dot product (a = b, c = d); with rows as stored (rows_gguf.wgsl) s is
// (1, 1, 0, 0) and the compiler drops the extra terms.
fn block_dot(t: u32, s: vec4<f32>) -> f32 {
    let xs = block_sum(t);
    if (HALF_SCALES) {
        let o = 8u * t;
        let lo = wv[0] * xv[o] + wv[1] * xv[o + 1u] + wv[2] * xv[o + 2u] + wv[3] * xv[o + 3u];
        let hi = wv[4] * xv[o + 4u] + wv[5] * xv[o + 5u] + wv[6] * xv[o + 6u] + wv[7] * xv[o + 7u];
        return s.x * (lo.x + lo.y + lo.z + lo.w) + s.y * (hi.x + hi.y + hi.z + hi.w) + s.z * xs.x + s.w * xs.y;
    }
    return s.x * dot32(t) + s.z * xs.z;
}
