{{KV_ENABLE}}
// Addressing of the paged KV cache (see llmchat/gpu/kvlayout.py): position `pos` of the sequence in slot `slot`
// lives in block block_table[slot * max_blocks + pos / BLOCK_TOKENS], at row pos % BLOCK_TOKENS of that block.
// Cache values are of type kv_t (f16 or f32, kvlayout.cache_type); kernels convert to f32 to compute.
// The including shader declares `block_table: array<u32>` and includes this file before any declaration (the
// f16 `enable` directive must come first).

alias kv_t = {{KV}};

const BLOCK_TOKENS: u32 = {{BLOCK_TOKENS}}u;
const NO_ROW: u32 = 0xffffffffu;

// The cache row (block * BLOCK_TOKENS + row in block) of a position, or NO_ROW past the sequence's table entries.
fn kv_row(slot: u32, pos: u32, max_blocks: u32) -> u32 {
    let b = pos / BLOCK_TOKENS;
    let entry = slot * max_blocks + b;
    if (b >= max_blocks || entry >= arrayLength(&block_table)) {
        return NO_ROW;
    }
    return block_table[entry] * BLOCK_TOKENS + pos % BLOCK_TOKENS;
}
