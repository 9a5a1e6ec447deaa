// How split layouts (rows_split.wgsl) store the quants of a 32-weight block, shared by the types' decoders.
// Bytes (Q8_0, IQ4_NL, IQ4_XS): two vec4<u32>, weight e in byte e, signed.
// Nibbles (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K): one vec4<u32> of the low four bits ordered as Q4_1 stores
// them, word m (0..3) holding weights 4m..4m+3 in its low nibbles and weights 16 + 4m.. in its high nibbles.
// Numbering the eight nibble words n = 0..7 (low nibbles of words 0..3, then their high nibbles), nibble word n
// holds weights 4n..4n+3; higher bits, where a type has them, are side words arranged to match.

// The vec4 holding the current block's side words (rows_split.wgsl decode_block loads it): decoders read them
// from here (side_word, side_pair).
var<private> sides: vec4<u32>;

// Side word s of the current block.
fn side_word(s: u32) -> u32 {
    let c = s & 3u;
    return select(select(sides.x, sides.y, c == 1u), select(sides.z, sides.w, c == 3u), c >= 2u);
}

// Side words s and s + 1 of the current block (s even).
fn side_pair(s: u32) -> vec2<u32> {
    return select(sides.xy, sides.zw, (s & 2u) != 0u);
}

// The signed bytes of the two vec4<u32> at split_quad(q) into wv.
fn split_bytes(q: u32) {
    let a = split_quad(q);
    let b = split_quad(q + 1u);
    wv[0] = sbytes4(a.x);
    wv[1] = sbytes4(a.y);
    wv[2] = sbytes4(a.z);
    wv[3] = sbytes4(a.w);
    wv[4] = sbytes4(b.x);
    wv[5] = sbytes4(b.y);
    wv[6] = sbytes4(b.z);
    wv[7] = sbytes4(b.w);
}

// The 32 nibbles of `v` as values 0..15 into wv.
fn split_nibbles(v: vec4<u32>) {
    wv[0] = lo_nibbles(v.x);
    wv[1] = lo_nibbles(v.y);
    wv[2] = lo_nibbles(v.z);
    wv[3] = lo_nibbles(v.w);
    wv[4] = hi_nibbles(v.x);
    wv[5] = hi_nibbles(v.y);
    wv[6] = hi_nibbles(v.z);
    wv[7] = hi_nibbles(v.w);
}

// Fifth bits: `bits` has bit e for weight e; the result has bit 8b + n for weight 4n + b, so nibble word n's fifth
// bits are (h << (4 - n)) & 0x10101010: one shift and one mask each (made once, at repack time).
fn fifth_bits_by_word(bits: u32) -> u32 {
    var h = 0u;
    for (var n = 0u; n < 8u; n++) {
        for (var b = 0u; b < 4u; b++) {
            h |= ((bits >> (4u * n + b)) & 1u) << (8u * b + n);
        }
    }
    return h;
}

// The 32 nibbles of `v` with their fifth bits from `h` (fifth_bits_by_word) as values 0..31 into wv.
fn split_nibbles5(v: vec4<u32>, h: u32) {
    let m = 0x10101010u;
    wv[0] = bytes4((v.x & 0x0f0f0f0fu) | ((h << 4u) & m));
    wv[1] = bytes4((v.y & 0x0f0f0f0fu) | ((h << 3u) & m));
    wv[2] = bytes4((v.z & 0x0f0f0f0fu) | ((h << 2u) & m));
    wv[3] = bytes4((v.w & 0x0f0f0f0fu) | ((h << 1u) & m));
    wv[4] = bytes4(((v.x >> 4u) & 0x0f0f0f0fu) | (h & m));
    wv[5] = bytes4(((v.y >> 4u) & 0x0f0f0f0fu) | ((h >> 1u) & m));
    wv[6] = bytes4(((v.z >> 4u) & 0x0f0f0f0fu) | ((h >> 2u) & m));
    wv[7] = bytes4(((v.w >> 4u) & 0x0f0f0f0fu) | ((h >> 3u) & m));
}

// Split quant word j (0..3) from the word `lo` holding weights 4j..4j+3 and the word `hi` holding weights
// 16 + 4j.., each weight's nibble at bit `shift` of its byte (the GGUF K-quant order).
fn nibble_word(lo: u32, hi: u32, shift: u32) -> u32 {
    return ((lo >> shift) & 0x0f0f0f0fu) | (((hi >> shift) & 0x0f0f0f0fu) << 4u);
}
