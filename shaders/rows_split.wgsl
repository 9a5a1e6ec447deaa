// Rows of W in the split layout (llmchat/gpu/tensors.py `split_weight`, written once after upload by
// repack_split.wgsl). A block's quants are SPLIT_QV vec4<u32> and its side words (scales, offsets, high bits)
// SPLIT_SW u32 (1, 2 or 4: within one vec4), both aligned, so a block costs a vec4 load and one load of its side
// words instead of 5 to 9 words at arbitrary even offsets. A row is p.row_bytes bytes (a multiple of 16) and rows
// come in tiles of SPLIT_TILE consecutive rows: a tile holds, block by block, the quants of its rows, then, block by
// block, their side words (then the rows' padding). Row g of a tile reads block i's quants at vec4
// SPLIT_TILE * SPLIT_QV * i + SPLIT_QV * g, so the rows a CPU emulator's invocation multiplies together (its
// 8-row tile) read one ascending stream of quants and one of side words, which the CPU's prefetchers follow; with
// rows stored one after another the same kernel made 16 streams and waited on memory (decode matvec 49152 x 512
// Q6_K on lavapipe, 32 bytes per block: 2.1 G multiply-adds/s with rows one after another, 3.0 in tiles). Rows
// past the last whole tile of a binding are stored one after another (a tile of one row: quants, then side words).
// The including shader has `p.k`, `p.row_bytes` and `p.w_rows` (rows held by this binding) and binds the weight
// twice, as `w` (words) and `wq` (vec4s); the type's decoder provides SPLIT_QV, SPLIT_SW, SPLIT_HALF_SCALES and
// `dequant_split`.

const SPLIT_TILE: u32 = 8u;  // a power of two

// Whether the two halves of a block (weights 0..15 and 16..31) have scales of their own (decode_block).
const HALF_SCALES: bool = SPLIT_HALF_SCALES;

// Where a row's blocks are: (vec4 of block 0's quants, word of block 0's side words, log2 of its tile's rows);
// block i's are i * SPLIT_QV and i * SPLIT_SW tile rows further on.
alias RowStart = vec3<u32>;

fn row_start(row: u32) -> RowStart {
    let first = row - row % SPLIT_TILE;
    var g = row - first;
    var n = SPLIT_TILE;
    if (first + SPLIT_TILE > p.w_rows) {  // past the last whole tile: a tile of its own
        g = 0u;
        n = 1u;
    }
    let base = ((row - g) * p.row_bytes) >> 4u;
    let sides = (base + n * (p.k >> 5u) * SPLIT_QV) * 4u;
    return RowStart(base + g * SPLIT_QV, sides + g * SPLIT_SW, countTrailingZeros(n));
}

// The raw quants of block i of the row at `start` into wv; returns (a, b, c, d): weights 0..15 are a * raw + c and
// weights 16..31 are b * raw + d (b = a and d = c unless HALF_SCALES), which the caller applies once per block and
// token instead of once per weight.
fn decode_block(start: RowStart, i: u32) -> vec4<f32> {
    let at = block_at(start, i);
    return dequant_split(at.x, at.y);
}

// (vec4 of the quants, word of the side words) of block i of the row at `start`.
fn block_at(start: RowStart, i: u32) -> vec2<u32> {
    return start.xy + (vec2<u32>(i * SPLIT_QV, i * SPLIT_SW) << vec2<u32>(start.z));
}
