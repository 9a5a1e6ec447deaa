// The 12-byte scale field shared by Q4_K and Q5_K: eight 6-bit scales and eight 6-bit mins, one pair per
// 32-weight sub-block. With the field's bytes B[0..11]:
//   sub-block s < 4:  scale = B[s] & 63,                          min = B[s + 4] & 63
//   sub-block s >= 4: scale = (B[s + 4] & 15) | (B[s - 4] >> 6) << 4, min = (B[s + 4] >> 4) | (B[s] >> 6) << 4
// i.e. bytes 0..7 carry the first four scales and mins whole, and lend their top two bits to the last four,
// whose low four bits sit in the nibbles of bytes 8..11.

// (scale, min) of sub-block `s` from the field starting at byte `p`.
fn k_scale_min(p: u32, s: u32) -> vec2<f32> {
    if (s < 4u) {
        return vec2<f32>(f32(w_u8(p + s) & 63u), f32(w_u8(p + s + 4u) & 63u));
    }
    let x = w_u8(p + s + 4u);
    let sc = (x & 15u) | ((w_u8(p + s - 4u) >> 6u) << 4u);
    let mn = (x >> 4u) | ((w_u8(p + s) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(mn));
}
