// How matmul.wgsl multiplies a block of W by a block of x in 8-bit integers (DOT i8), as llama.cpp's quantized dot
// products do: the block of x becomes round_x8's integers in [-127, 127] and its f16 scale, kept apart (xi, xd);
// the block of W its raw quants as signed bytes (wi, from <type>_i8.wgsl) and the scales and offsets decode_block
// would apply. The 32 products are summed four at a time by dot4I8Packed into an i32 and scaled once per block and
// token; an offset (Q4_0's -8 d, Q4_1's min) multiplies the block's sum of x, summed in integers too. The result is
// XQ8's (x rounded to 8 bits, times the f32 weights) up to the order of float additions.
// Types: those with a <type>_i8.wgsl (variants.INT8_TYPES), in either layout (rows_<LAYOUT>_i8.wgsl).
requires packed_4x8_integer_dot_product;
//!include rows_{{LAYOUT}}_i8.wgsl
//!include {{QUANT}}_i8.wgsl

var<private> wi: array<u32, 8>;       // the block of W: raw quants, four signed bytes a word (weights 4j.. in wi[j])
var<private> xi: array<u32, 8 * TT>;  // per token, the block of x as integers, four signed bytes a word
var<private> xd: array<f32, TT>;      // per token, the scale of its block's integers

// The block of W to multiply: its quants into wi; returns its scales and offsets as decode_block does.
fn decode(start: RowStart, i: u32, reuse: bool) -> vec4<f32> {
    return decode_block_i8(start, i, reuse);
}

// Token t's block of x is in xv: its integers and scale (round_x8's), and their sums (times the scale) for offsets.
fn finish_x(t: u32) {
    let o = 8u * t;
    let d = x8_scale(o);
    let div = select(d, 1.0, d == 0.0);  // an all-zero block: integers 0
    xi[o] = pack4xI8(vec4<i32>(round(xv[o] / div)));
    xi[o + 1u] = pack4xI8(vec4<i32>(round(xv[o + 1u] / div)));
    xi[o + 2u] = pack4xI8(vec4<i32>(round(xv[o + 2u] / div)));
    xi[o + 3u] = pack4xI8(vec4<i32>(round(xv[o + 3u] / div)));
    xi[o + 4u] = pack4xI8(vec4<i32>(round(xv[o + 4u] / div)));
    xi[o + 5u] = pack4xI8(vec4<i32>(round(xv[o + 5u] / div)));
    xi[o + 6u] = pack4xI8(vec4<i32>(round(xv[o + 6u] / div)));
    xi[o + 7u] = pack4xI8(vec4<i32>(round(xv[o + 7u] / div)));
    let d16 = f16_round(d);
    xd[t] = d16;
    let ones = 0x01010101u;
    let lo = dot4I8Packed(xi[o], ones) + dot4I8Packed(xi[o + 1u], ones) + dot4I8Packed(xi[o + 2u], ones)
           + dot4I8Packed(xi[o + 3u], ones);
    let hi = dot4I8Packed(xi[o + 4u], ones) + dot4I8Packed(xi[o + 5u], ones) + dot4I8Packed(xi[o + 6u], ones)
           + dot4I8Packed(xi[o + 7u], ones);
    xsum[t] = vec4<f32>(f32(lo), f32(hi), f32(lo + hi), 0.0) * d16;
}

// Token t's block of x times the block in wi with its scales and offsets s = (a, b, c, d) (see matmul_dot_f32.wgsl:
// a, b scale the raw quants of the two halves, c, d are the halves' offsets).
fn block_dot(t: u32, s: vec4<f32>) -> f32 {
    let xs = block_sum(t);
    let o = 8u * t;
    let lo = dot4I8Packed(wi[0], xi[o]) + dot4I8Packed(wi[1], xi[o + 1u]) + dot4I8Packed(wi[2], xi[o + 2u])
           + dot4I8Packed(wi[3], xi[o + 3u]);
    let hi = dot4I8Packed(wi[4], xi[o + 4u]) + dot4I8Packed(wi[5], xi[o + 5u]) + dot4I8Packed(wi[6], xi[o + 6u])
           + dot4I8Packed(wi[7], xi[o + 7u]);
    if (HALF_SCALES) {
        return xd[t] * (s.x * f32(lo) + s.y * f32(hi)) + s.z * xs.x + s.w * xs.y;
    }
    return s.x * xd[t] * f32(lo + hi) + s.z * xs.z;
}

// The 32 nibbles of `v` (split_quants.wgsl's order) as bytes 0..15 into wi.
fn nibbles_i8(v: vec4<u32>) {
    wi[0] = v.x & 0x0f0f0f0fu;
    wi[1] = v.y & 0x0f0f0f0fu;
    wi[2] = v.z & 0x0f0f0f0fu;
    wi[3] = v.w & 0x0f0f0f0fu;
    wi[4] = (v.x >> 4u) & 0x0f0f0f0fu;
    wi[5] = (v.y >> 4u) & 0x0f0f0f0fu;
    wi[6] = (v.z >> 4u) & 0x0f0f0f0fu;
    wi[7] = (v.w >> 4u) & 0x0f0f0f0fu;
}
