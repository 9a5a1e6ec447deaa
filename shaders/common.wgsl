// Byte-level reads from a weight buffer `w: array<u32>` holding GGUF blocks exactly as stored on disk.
// GGUF blocks are not always 4-byte aligned (Q4_0 is 18 bytes, Q8_0 34), so decoders address bytes and these
// helpers shift them out of the enclosing words. Every quant decoder includes this file.

fn w_u8(byte: u32) -> u32 {
    return (w[byte >> 2u] >> ((byte & 3u) * 8u)) & 0xffu;
}

// `byte` must be even.
fn w_u16(byte: u32) -> u32 {
    return (w[byte >> 2u] >> ((byte & 2u) * 8u)) & 0xffffu;
}

fn w_f16(byte: u32) -> f32 {
    return unpack2x16float(w_u16(byte)).x;
}

// Four bytes starting at an even `byte` offset, as one little-endian word.
fn w_u32(byte: u32) -> u32 {
    let i = byte >> 2u;
    if ((byte & 2u) == 0u) {
        return w[i];
    }
    return (w[i] >> 16u) | (w[i + 1u] << 16u);
}

// The four bytes of `q` as unsigned values, lowest byte first.
fn bytes4(q: u32) -> vec4<f32> {
    return vec4<f32>(f32(q & 0xffu), f32((q >> 8u) & 0xffu), f32((q >> 16u) & 0xffu), f32(q >> 24u));
}

// The four bytes of `q` as signed values, lowest byte first.
fn sbytes4(q: u32) -> vec4<f32> {
    let s = bitcast<vec4<i32>>(vec4<u32>(q << 24u, q << 16u, q << 8u, q)) >> vec4<u32>(24u);
    return vec4<f32>(s);
}

// Low and high nibbles of the four bytes of `q`.
fn lo_nibbles(q: u32) -> vec4<f32> {
    return bytes4(q & 0x0f0f0f0fu);
}

fn hi_nibbles(q: u32) -> vec4<f32> {
    return bytes4((q >> 4u) & 0x0f0f0f0fu);
}

// The four low bits of `h` moved to the low bit of each byte (bit i to bit 8i), the shape `bytes4` expects.
// Multiplying by 1 + 2^7 + 2^14 + 2^21 lands bit i at 8i among other copies that the mask drops; no two copies
// share a position, so nothing carries. Used where 5-bit quants keep their fifth bits in a separate word.
fn spread4(h: u32) -> u32 {
    return ((h & 0xfu) * 0x00204081u) & 0x01010101u;
}
