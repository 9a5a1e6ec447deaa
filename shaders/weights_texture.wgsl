// How kernels reading the split layout (rows_split.wgsl) fetch its words: from a 2-D rgba32uint texture holding the
// weight's bytes in rows of TEXEL_ROW texels (llmchat/gpu/tensors.py `texture_weight`), on CPU emulators
// (variants.py `weight_textures`). There every storage-buffer load is a scalar loop over the SIMD lanes, while a
// texel fetch is a vector gather: on lavapipe a 128 MiB read ran at 0.73 GB/s from a buffer and 5.2 GB/s from a
// texture, and the 131072 x 640 Q8_0 decode matvec went from 148 to 48 ms. The other source is the buffer
// (weights_buffer.wgsl); QUADS is the binding number the kernel gives it, and its `w` is then bound but unused.
@group(0) @binding({{QUADS}}) var wtex: texture_2d<u32>;

const TEXEL_ROW: u32 = 4096u;  // texels per row of the texture: 64 KiB

// vec4 q of the weight (16 bytes from byte 16 q).
fn split_quad(q: u32) -> vec4<u32> {
    return textureLoad(wtex, vec2<u32>(q % TEXEL_ROW, q / TEXEL_ROW), 0);
}
