// Attention in two passes for CPU emulators (the "scores" kernel), pass 1: one invocation per (token, QH heads of
// one kv group, POS neighbouring visible positions) writes the scores of its heads against those positions,
//   dst[(t * n_head / QH + g) * n_splits + j] = (c(q_h . k_j * scale) for the group's heads h; unused lanes),
// j counted from the token's first visible position (attention_io.wgsl `visible`), n_splits the scores each token
// has room for; a position past the sequence's block table scores -FLT_MAX. attention_values.wgsl then weighs V.
// Why two passes: one invocation per (token, heads, range) keeps its q and output rows in private arrays, which
// CPU emulators hold in memory and reach with a gather per SIMD batch; here no invocation holds an array, and the
// positions of a short context spread over every SIMD lane (Gemma 3's decode on lavapipe used 2 lanes of 16).
//!include attention_io.wgsl
//!include token_order.wgsl

const HD4: u32 = {{HD4}}u;  // head_dim / 4
const QH: u32 = {{QH}}u;    // query heads per invocation (1 to 4, of one kv group): they share every K load
const WG: u32 = {{WG}}u;
const POS: u32 = 4u;  // positions per invocation

// The scores of one position from its dot products: column hh of `d` holds head hh's four partial sums.
fn finish_scores(d: mat4x4<f32>, row: u32) -> vec4<f32> {
    var s = vec4<f32>(1.0) * d * p.scale;
    if (p.softcap != 0.0) {
        // tanh saturates long before 15; the clamp keeps exp-based tanh implementations away from inf / inf
        s = p.softcap * tanh(clamp(s / p.softcap, vec4<f32>(-15.0), vec4<f32>(15.0)));
    }
    return select(s, vec4<f32>(NEG), row == NO_ROW);
}

// The cache row of visible position j of the token (NO_ROW past its visible positions or its block table).
fn row_of(info: vec4<u32>, seen: vec2<u32>, j: u32) -> u32 {
    return select(NO_ROW, kv_row(info.z, seen.x + j, p.max_blocks), j < seen.y);
}

// The element offset of head group column `kv_col` in cache row `row` (a missing row reads row 0, any valid row,
// so the loop below needs no branch; its scores are replaced).
fn k_at(row: u32, kv_col: u32) -> u32 {
    return select(row, 0u, row == NO_ROW) * p.n_kv_head * HD4 + kv_col;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // Each invocation takes POS neighbouring positions, so each q load serves POS K rows.
    let id = gid.x + gid.y * nwg.x * WG;
    let groups = p.n_head / QH;
    let runs = (p.n_splits + POS - 1u) / POS;
    let j = (id % runs) * POS;
    let g = (id / runs) % groups;
    let slot = id / (runs * groups);
    if (slot >= p.slots) {
        return;  // past the grid's last slot (it is padded to whole workgroups)
    }
    let t = step_token(slot, p.slots);
    if (t >= step.n_tokens) {
        return;
    }
    let info = tokens[t];
    let seen = visible(info.y);
    if (j >= seen.y) {
        return;
    }
    let h0 = g * QH;
    let kv_col = (h0 / (p.n_head / p.n_kv_head)) * HD4;
    let r0 = row_of(info, seen, j);
    let r1 = row_of(info, seen, j + 1u);
    let r2 = row_of(info, seen, j + 2u);
    let r3 = row_of(info, seen, j + 3u);
    let k0 = k_at(r0, kv_col);
    let k1 = k_at(r1, kv_col);
    let k2 = k_at(r2, kv_col);
    let k3 = k_at(r3, kv_col);
    let q0 = (t * p.qkv_stride) / 4u + h0 * HD4;
    // d_n: the dot products of position j + n, column hh for head h0 + hh
    var d0 = mat4x4<f32>();
    var d1 = mat4x4<f32>();
    var d2 = mat4x4<f32>();
    var d3 = mat4x4<f32>();
    for (var i = 0u; i < HD4; i++) {
        var q = mat4x4<f32>();
        q[0] = qkv[q0 + i];
        if (QH > 1u) {
            q[1] = qkv[q0 + HD4 + i];
        }
        if (QH > 2u) {
            q[2] = qkv[q0 + 2u * HD4 + i];
        }
        if (QH > 3u) {
            q[3] = qkv[q0 + 3u * HD4 + i];
        }
        let a = vec4<f32>(k_cache[k0 + i]);
        let b = vec4<f32>(k_cache[k1 + i]);
        let c = vec4<f32>(k_cache[k2 + i]);
        let e = vec4<f32>(k_cache[k3 + i]);
        d0 += mat4x4<f32>(q[0] * a, q[1] * a, q[2] * a, q[3] * a);
        d1 += mat4x4<f32>(q[0] * b, q[1] * b, q[2] * b, q[3] * b);
        d2 += mat4x4<f32>(q[0] * c, q[1] * c, q[2] * c, q[3] * c);
        d3 += mat4x4<f32>(q[0] * e, q[1] * e, q[2] * e, q[3] * e);
    }
    let r = (t * groups + g) * p.n_splits + j;
    dst[r] = finish_scores(d0, r0);
    if (j + 1u < seen.y) {
        dst[r + 1u] = finish_scores(d1, r1);
    }
    if (j + 2u < seen.y) {
        dst[r + 2u] = finish_scores(d2, r2);
    }
    if (j + 3u < seen.y) {
        dst[r + 3u] = finish_scores(d3, r3);
    }
}
