// The 16 values IQ4_NL and IQ4_XS quants index (llama.cpp's kvalues_iq4nl): denser near zero, where most
// weights are.
var<private> IQ4_GRID: array<i32, 16> = array<i32, 16>(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53,
                                                        69, 89, 113);

// The grid values of the low nibbles of the four bytes of `q`.
fn iq4_values(q: u32) -> vec4<f32> {
    return vec4<f32>(f32(IQ4_GRID[q & 15u]), f32(IQ4_GRID[(q >> 8u) & 15u]), f32(IQ4_GRID[(q >> 16u) & 15u]),
                     f32(IQ4_GRID[(q >> 24u) & 15u]));
}

// The same four values as the signed bytes of one word.
fn iq4_bytes(q: u32) -> u32 {
    var r = 0u;
    for (var c = 0u; c < 4u; c++) {
        r |= (bitcast<u32>(IQ4_GRID[(q >> (8u * c)) & 15u]) & 0xffu) << (8u * c);
    }
    return r;
}
