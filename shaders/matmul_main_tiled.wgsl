// matmul.wgsl's entry point for SHAPE tiled (prefill on GPUs): a workgroup computes a tile of BR = R * WGR rows x
// BT = TT * (WG / WGR) tokens. For each 32-element block of k it first decodes block i of every row of the tile
// into workgroup memory (wt, scales applied: plain f32 weights) and loads block i of x of every token of the tile
// (xt, NORM's g and XQ8's rounding applied), then every invocation multiplies its R rows by its TT tokens from
// there: each block of W is decoded once per workgroup and reused for BT tokens, each block of x loaded once and
// reused for BR rows. Invocation (ir, it) = (l % WGR, l / WGR) holds rows r0 + ir + WGR * r and tokens
// t0 + it + WGT * t, so neighbouring invocations read neighbouring vec4s of wt. Rows and tokens past the end are
// clamped (read the last one) and never stored. Needs BT <= WG (one invocation loads each token's block).

const WG: u32 = {{WG}}u;
const WGR: u32 = {{WGR}}u;      // invocations along rows
const WGT: u32 = WG / WGR;      // invocations along tokens
const BR: u32 = R * WGR;        // rows of the workgroup's tile
const BT: u32 = TT * WGT;       // tokens of the workgroup's tile
const WT_ROWS: u32 = HALVES * BR;  // decoded rows: the gate rows, then (MODE 2) the up rows

var<workgroup> wt: array<vec4<f32>, 8u * WT_ROWS>;  // [vec4 j of the block][tile row]
var<workgroup> xt: array<vec4<f32>, 8u * BT>;       // [vec4 j of the block][tile token]
var<workgroup> tss: array<f32, BT>;                // NORM: each token's sum of squares, passed on at the end

// Decodes block i of decoded row d (d < BR: gate or plain rows; d >= BR: up rows) into wt.
fn decode_row(d: u32, tile_r0: u32, i: u32) {
    let h = d / BR;
    var row = min(tile_r0 + d % BR, p.n - 1u);
    if (h == 1u) {
        row += p.glu_rows;
    }
    let s = decode_block(row_start(row), i, false);
    for (var j = 0u; j < 4u; j++) {
        wt[j * WT_ROWS + d] = wv[j] * s.x + s.z;
        wt[(j + 4u) * WT_ROWS + d] = wv[j + 4u] * s.y + s.w;
    }
}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, lane: Lane) {
    let l = lane.id;  // XLOAD plain: the local invocation index
    let tile_r0 = wid.x * BR;
    let tile_t0 = wid.y * BT;
    lane_id = lane.id;
    if (tile_t0 >= step.n_tokens) {
        return;  // uniform: the whole workgroup leaves together, before any barrier
    }
    let ir = l % WGR;
    let it = l / WGR;
    r0 = tile_r0 + ir;
    t0 = tile_t0 + it;
    for (var i = 0u; i < p.k / 32u; i++) {
        for (var d = l; d < WT_ROWS; d += WG) {
            decode_row(d, tile_r0, i);
        }
        if (l < BT) {
            if (NORM) {
                load_g(i * 8u, lane_id);
            }
            t0 = tile_t0 + l;  // the token whose blocks of x this invocation loads (load_token clamps it)
            load_token(0u, i * 32u);
            t0 = tile_t0 + it;
            for (var j = 0u; j < 8u; j++) {
                xt[j * BT + l] = xv[j];
            }
        }
        workgroupBarrier();
        for (var t = 0u; t < TT; t++) {
            for (var j = 0u; j < 8u; j++) {
                xv[8u * t + j] = xt[j * BT + it + WGT * t];
            }
        }
        for (var a = 0u; a < HALVES * R; a++) {
            let d = (a / R) * BR + ir + WGR * (a % R);
            for (var j = 0u; j < 8u; j++) {
                wv[j] = wt[j * WT_ROWS + d];
            }
            accumulate(a, vec4<f32>(1.0, 1.0, 0.0, 0.0));
        }
        workgroupBarrier();
    }
    if (NORM) {
        if (l < BT) {
            tss[l] = ss[0];
        }
        workgroupBarrier();
        for (var t = 0u; t < TT; t++) {
            ss[t] = tss[it + WGT * t];
        }
    }
    store_rows();
}
