// Rotary position embedding and KV-cache store, after the fused QKV matmul. For every token t:
// - q heads of qkv[t] are rotated in place;
// - k heads are rotated in place and written to the K cache at the token's (sequence slot, position);
// - v heads are copied to the V cache there.
// Pair i of a head is rotated by theta_i = pos * freq_scale * freq_base^(-2i/rope_dim) / factor_i: the elements
// (2i, 2i+1) in normal mode (llama, mistral), (i, i + rope_dim/2) in NeoX mode (qwen2, gemma, phi3); dimensions
// from rope_dim on pass through (rope_dim 0: a layer without RoPE, only stored). One invocation handles one pair
// of one head of one token.
//
// Precision: the angle is not formed in f32 radians, whose rounding alone reaches 2e-3 rad at position 32k and
// whose sin/cos degrade for large arguments on many GPUs. The host gives each pair its frequency in turns per
// position as a 64-bit fixed-point fraction; pos * frequency modulo one turn is then exact in integer arithmetic,
// and sin/cos only ever see an angle in [-pi, pi). A factor from `factors` (llama3 rope_freqs) divides the turn
// count in f32, exactly when the factor is 1 and with a small phase otherwise.
//!include kv_block.wgsl
//!include token_order.wgsl

struct Params {
    n_head: u32,      // query heads
    n_kv_head: u32,   // key (and value) heads
    head_dim: u32,    // elements per head (even)
    rope_dim: u32,    // leading elements of a head that are rotated (even, <= head_dim)
    qkv_stride: u32,  // elements between consecutive tokens in qkv: (n_head + 2 * n_kv_head) * head_dim
    max_blocks: u32,  // block-table entries per sequence slot
    neox: u32,        // 1: pairs (i, i + rope_dim/2); 0: pairs (2i, 2i+1)
    mscale: f32,      // rotated q and k elements are scaled by this (LongRoPE's attention factor; 1 otherwise)
    // Turns per position of pair i, as a fraction of 2^64 in two words (low, high): pairs 2j and 2j+1 share
    // element j as (low 2j, high 2j, low 2j+1, high 2j+1).
    freq: array<vec4<u32>, {{FREQ_VEC4}}>,
}

struct Step {
    n_tokens: u32,  // tokens in this step
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> tokens: array<vec4<u32>>;  // (id, position, sequence slot, 0) per token
@group(0) @binding(4) var<storage, read_write> k_cache: array<kv_t>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<kv_t>;
@group(0) @binding(6) var<storage, read> block_table: array<u32>;
@group(0) @binding(7) var<storage, read> factors: array<f32>;  // rope_dim/2 divisors; bound only when HAS_FACTORS

const HAS_FACTORS: bool = {{HAS_FACTORS}};
const TWO_PI: f32 = 6.283185307179586;

// The high 32 bits of the 64-bit product a * b, from 16-bit halves (WGSL has no 64-bit integers).
fn mul_hi(a: u32, b: u32) -> u32 {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = ((a0 * b0) >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
}

// The angle of pair i at `pos`, in radians within [-pi, pi).
fn angle(i: u32, pos: u32) -> f32 {
    let e = p.freq[i >> 1u];
    var f = e.xy;
    if ((i & 1u) == 1u) {
        f = e.zw;
    }
    // pos * (hi * 2^32 + lo) = whole * 2^64 + frac1 * 2^32 + frac0
    let frac1 = pos * f.y + mul_hi(pos, f.x);
    let carry = select(0u, 1u, frac1 < pos * f.y);
    // The fraction centred on zero: a high word >= 2^31 means "minus a bit less than half a turn".
    var turns = f32(bitcast<i32>(frac1)) * 2.3283064365386963e-10 + f32(pos * f.x) * 5.421010862427522e-20;
    if (HAS_FACTORS) {
        let whole = f32(mul_hi(pos, f.y) + carry + (frac1 >> 31u));
        let q = whole / factors[i];
        turns = (q - round(q)) + turns / factors[i];
        turns -= round(turns);
    }
    return turns * TWO_PI;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = step_token(gid.y, nwg.y);
    let half = p.head_dim / 2u;
    let head = gid.x / half;
    let i = gid.x % half;
    let heads = p.n_head + 2u * p.n_kv_head;
    if (t >= step.n_tokens || head >= heads) {
        return;
    }
    let info = tokens[t];
    // Elements of the pair within the head; past rope_dim pairs are (2i, 2i+1) in both modes and pass through.
    var e0 = 2u * i;
    var e1 = e0 + 1u;
    let rotated = 2u * i < p.rope_dim;
    if (rotated && p.neox == 1u) {
        e0 = i;
        e1 = i + p.rope_dim / 2u;
    }
    let base = t * p.qkv_stride + head * p.head_dim;
    var x0 = qkv[base + e0];
    var x1 = qkv[base + e1];
    if (rotated && head < p.n_head + p.n_kv_head) {
        let a = angle(i, info.y);
        let c = cos(a) * p.mscale;
        let s = sin(a) * p.mscale;
        let y0 = x0 * c - x1 * s;
        x1 = x0 * s + x1 * c;
        x0 = y0;
        qkv[base + e0] = x0;
        qkv[base + e1] = x1;
    }
    if (head < p.n_head) {
        return;
    }
    let is_v = head >= p.n_head + p.n_kv_head;
    let kv_head = head - p.n_head - select(0u, p.n_kv_head, is_v);
    let row = kv_row(info.z, info.y, p.max_blocks);
    if (row == NO_ROW) {
        return;  // the position has no block (the host prevents this; never write outside the sequence)
    }
    let o = (row * p.n_kv_head + kv_head) * p.head_dim;
    if (is_v) {
        v_cache[o + e0] = kv_t(x0);
        v_cache[o + e1] = kv_t(x1);
    } else {
        k_cache[o + e0] = kv_t(x0);
        k_cache[o + e1] = kv_t(x1);
    }
}
