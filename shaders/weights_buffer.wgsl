// How kernels reading the split layout (rows_split.wgsl) fetch its words: from the weight's storage buffer, bound a
// second time as vec4s (the kernel's `w` holds the same bytes as u32 words). The other source is a texture
// (weights_texture.wgsl); QUADS is the binding number the kernel gives it.
@group(0) @binding({{QUADS}}) var<storage, read> wq: array<vec4<u32>>;

// vec4 q of the weight (16 bytes from byte 16 q).
fn split_quad(q: u32) -> vec4<u32> {
    return wq[q];
}
