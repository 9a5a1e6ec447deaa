// matmul.wgsl's entry point for SHAPE rowgroup (the coalesced matvec of GPUs): a workgroup of WG invocations
// computes one tile of R rows x TT tokens. Invocation l takes blocks l, l + WG, l + 2 WG, ... of the tile's rows,
// so at every step neighbouring invocations read neighbouring blocks of a row: for the 32-element types a block
// is 5 to 9 words, for K-quants 8 invocations share one super-block; either way the words one step reads are one
// contiguous stretch of the row, which is what GPU memory systems serve in whole cache lines. The partial sums
// (and with NORM the partial sums of squares) are then added across the workgroup (reduce_tile, from
// matmul_reduce_<REDUCE>.wgsl) and invocation 0 stores the tile.
// Workgroups are numbered along x and, past 65535 of them (vocabulary-sized outputs), along z too.
//!include matmul_reduce_{{REDUCE}}.wgsl

const WG: u32 = {{WG}}u;  // a power of two

// The values summed across the workgroup: the accumulators, then (NORM) the sums of squares.
const RED_N: u32 = HALVES * R * TT + TT;

fn red_get(e: u32) -> f32 {
    if (e < HALVES * R * TT) {
        return acc[e];
    }
    return ss[e - HALVES * R * TT];
}

fn red_set(e: u32, v: f32) {
    if (e < HALVES * R * TT) {
        acc[e] = v;
    } else {
        ss[e - HALVES * R * TT] = v;
    }
}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, lane: Lane,
        coop: Coop) {
    // The guard reads lets, not the private r0/t0: uniformity analysis (Tint's) takes every private variable as
    // varying, and would refuse the barrier and subgroupAdd after the return.
    let row0 = (wid.x + wid.z * groups.x) * R;
    let tok0 = wid.y * TT;
    if (row0 >= p.n || tok0 >= step.n_tokens) {
        return;  // uniform: the whole workgroup leaves together, before any barrier
    }
    r0 = row0;
    t0 = tok0;
    lane_id = lane.id;
    start_rows();
    for (var i = coop.local.x; i < p.k / 32u; i += WG) {
        tile_block(i);
    }
    reduce_tile(coop);
    if (coop.local.x == 0u) {
        store_rows();
    }
}
