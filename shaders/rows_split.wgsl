// Rows of W in the split layout (llmchat/gpu/tensors.py `split_weight`, written once after upload by
// repack_split.wgsl). A block's quants are SPLIT_QV vec4<u32> and its side words (scales, offsets, high bits)
// SPLIT_SW u32 (1, 2 or 4: within one vec4), both aligned, so a block costs a vec4 load and one load of its side
// words instead of 5 to 9 words at arbitrary even offsets. A row is p.row_bytes bytes (a multiple of 16) and rows
// come in tiles of SPLIT_TILE consecutive rows: a tile holds, block by block, the quants of its rows, then, block by
// block, their side words (then the rows' padding). Row g of a tile reads block i's quants at vec4
// SPLIT_TILE * SPLIT_QV * i + SPLIT_QV * g, so the rows a CPU emulator's invocation multiplies together (its
// 8-row tile) read one ascending stream of quants and one of side words, which the CPU's prefetchers follow; with
// rows stored one after another the same kernel made 16 streams and waited on memory (decode matvec 49152 x 512
// Q6_K on lavapipe, 32 bytes per block: 2.1 G multiply-adds/s with rows one after another, 3.0 in tiles). Every
// binding holds whole tiles (its last one padded: tensors.py `split_parts`).
// The including shader has `p.k` and `p.row_bytes` and binds the weight twice, as `w` (words) and `wq` (vec4s);
// the type's decoder provides SPLIT_QV, SPLIT_SW, SPLIT_HALF_SCALES and `dequant_split`.

const SPLIT_TILE: u32 = 8u;  // a power of two

// Whether the two halves of a block (weights 0..15 and 16..31) have scales of their own (decode_block).
const HALF_SCALES: bool = SPLIT_HALF_SCALES;

// The side words of block i of SIDE_ROWS neighbouring rows of a tile (from a row that is a multiple of SIDE_ROWS)
// lie in one vec4, which a kernel multiplying those rows together loads once (decode_block's `reuse`): on lavapipe
// a texel fetch per row and block was a third of the 21848 x 640 Q8_0 decode matvec's time. `reuse` must be known
// when the kernel is compiled: lavapipe runs both sides of a branch whatever its lanes decide, so a test at run
// time (is this texel the one already loaded?) fetched anyway.
const SIDE_ROWS: u32 = 4u / SPLIT_SW;

// Where a row's blocks are: (vec4 of block 0's quants, word of block 0's side words); block i's are i * SPLIT_QV
// and i * SPLIT_SW tile rows further on.
alias RowStart = vec2<u32>;

fn row_start(row: u32) -> RowStart {
    let g = row % SPLIT_TILE;
    let base = ((row - g) * p.row_bytes) >> 4u;
    let side0 = (base + SPLIT_TILE * (p.k >> 5u) * SPLIT_QV) * 4u;
    return RowStart(base + g * SPLIT_QV, side0 + g * SPLIT_SW);
}

// (vec4 of the quants, word of the side words) of block i of the row at `start`.
fn block_at(start: RowStart, i: u32) -> vec2<u32> {
    return start + vec2<u32>(i * SPLIT_QV, i * SPLIT_SW) * SPLIT_TILE;
}

// The raw quants of block i of the row at `start` into wv; returns (a, b, c, d): weights 0..15 are a * raw + c and
// weights 16..31 are b * raw + d (b = a and d = c unless HALF_SCALES), which the caller applies once per block and
// token instead of once per weight. With `reuse` the block's side words are those the last call loaded (a
// neighbour's: see SIDE_ROWS).
fn decode_block(start: RowStart, i: u32, reuse: bool) -> vec4<f32> {
    let at = block_sides(start, i, reuse);
    return dequant_split(at.x, at.y);
}

// block_at's addresses, with the block's side words loaded into `sides` (split_quants.wgsl) unless `reuse`.
fn block_sides(start: RowStart, i: u32, reuse: bool) -> vec2<u32> {
    let at = block_at(start, i);
    if (!reuse) {
        sides = split_quad(at.y >> 2u);
    }
    return at;
}
