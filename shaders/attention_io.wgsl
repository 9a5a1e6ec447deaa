// The bindings and Params the attention kernels take (ops.attention records them with the same bindings): the
// step's q|k|v rows, its token records, the paged K/V cache of one layer and its block table, and `dst`, the output
// rows or (n_splits > 1) the partial records attention_combine.wgsl merges (attention_scores.wgsl: the scores).
//!include kv_block.wgsl

struct Params {
    n_head: u32,      // query heads
    n_kv_head: u32,   // key/value heads (divides n_head)
    qkv_stride: u32,  // elements between consecutive tokens in qkv (a multiple of 4)
    out_stride: u32,  // elements between consecutive tokens in out (a multiple of 4)
    max_blocks: u32,  // block-table entries per sequence slot
    window: u32,      // positions a token sees, itself included; 0 = no window
    n_splits: u32,    // ranges each token's positions are cut into (attention_scores.wgsl: scores per token)
    slots: u32,       // token slots of the recorded step (the grid's; the step fills n_tokens of them)
    scale: f32,       // multiplies q . k
    softcap: f32,     // 0 = no soft cap
}

struct Step {
    n_tokens: u32,  // tokens in this step
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> qkv: array<vec4<f32>>;    // [T, (n_head + 2 n_kv_head) * head_dim]
@group(0) @binding(3) var<storage, read> tokens: array<vec4<u32>>;  // (id, position, sequence slot, 0) per token
@group(0) @binding(4) var<storage, read> k_cache: array<vec4<kv_t>>;
@group(0) @binding(5) var<storage, read> v_cache: array<vec4<kv_t>>;
@group(0) @binding(6) var<storage, read> block_table: array<u32>;
@group(0) @binding(7) var<storage, read_write> dst: array<vec4<f32>>;

const NEG: f32 = -3.4028234663852886e38;  // -FLT_MAX: the score of a position no token may see

// The first position a token at `pos` sees, and how many it sees (itself included).
fn visible(pos: u32) -> vec2<u32> {
    var lo = 0u;
    if (p.window != 0u && pos >= p.window) {
        lo = pos + 1u - p.window;
    }
    return vec2<u32>(lo, pos + 1u - lo);
}
