// Rows of W in the split layout (llmchat/gpu/tensors.py `split_weight`, written once after upload by
// repack_split.wgsl). A block's quants are SPLIT_QV vec4<u32> and its side words (scales, offsets, high bits)
// SPLIT_SW u32 (1, 2 or 4: within one vec4), both aligned, so a block costs a vec4 load and one load of its side
// words instead of 5 to 9 words at arbitrary even offsets. Rows come in tiles of SPLIT_TILE consecutive rows (the
// last tile of a binding may be shorter): a tile of n rows is n * p.row_bytes bytes holding first, block by block,
// the quants of its n rows, then, block by block, their side words. Row g of a tile reads block i's quants at vec4
// n * SPLIT_QV * i + SPLIT_QV * g, so the rows a CPU emulator's invocation multiplies together (its 8-row tile)
// read one ascending stream of quants and one of side words, which the CPU's prefetchers follow; with rows stored
// one after another the same kernel made 16 streams and waited on memory (decode matvec 49152 x 512 Q6_K on
// lavapipe, rows of 32 bytes per block: 0.54 of Q4_1's multiply-adds per second in rows, 0.85 in tiles).
// The including shader has `p.k`, `p.row_bytes` and `p.w_rows` (rows held by this binding) and binds the weight
// twice, as `w` (words) and `wq` (vec4s); the type's decoder provides SPLIT_QV, SPLIT_SW, SPLIT_HALF_SCALES and
// `dequant_split`.

const SPLIT_TILE: u32 = 8u;

// Whether the two halves of a block (weights 0..15 and 16..31) have scales of their own (decode_block).
const HALF_SCALES: bool = SPLIT_HALF_SCALES;

// Where a row's blocks are: (vec4 of block 0's quants, word of block 0's side words, and the vec4 and word
// strides from one block to the next).
alias RowStart = vec4<u32>;

fn row_start(row: u32) -> RowStart {
    let first = row - row % SPLIT_TILE;
    let n = min(SPLIT_TILE, p.w_rows - first);  // rows in the tile
    let base = (first * p.row_bytes) >> 4u;      // a tile starts on a vec4: row_bytes * SPLIT_TILE is a multiple of 16
    let g = row - first;
    let sides = (base + n * (p.k >> 5u) * SPLIT_QV) * 4u;
    return RowStart(base + g * SPLIT_QV, sides + g * SPLIT_SW, n * SPLIT_QV, n * SPLIT_SW);
}

// The raw quants of block i of the row at `start` into wv; returns (a, b, c, 0): weights 0..15 are a * raw + c and
// weights 16..31 are b * raw + c (b = a unless HALF_SCALES), which the caller applies once per block and token
// instead of once per weight.
fn decode_block(start: RowStart, i: u32) -> vec4<f32> {
    return dequant_split(start.x + i * start.z, start.y + i * start.w);
}
