// Attention in two passes for CPU emulators (the "scores" kernel), pass 1: one invocation per (token, QH heads of
// one kv group, visible position) writes the scores of its heads against that position,
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
const NEG: f32 = -3.4028234663852886e38;

// The scores of heads h0.. against the K row at `k0` (K_ROW: none), and of the dot products kept in d0..d3.
fn finish_scores(d0: vec4<f32>, d1: vec4<f32>, d2: vec4<f32>, d3: vec4<f32>, row: u32) -> vec4<f32> {
    let one = vec4<f32>(1.0);
    var s = vec4<f32>(dot(d0, one), dot(d1, one), dot(d2, one), dot(d3, one)) * p.scale;
    if (p.softcap != 0.0) {
        // tanh saturates long before 15; the clamp keeps exp-based tanh implementations away from inf / inf
        s = p.softcap * tanh(clamp(s / p.softcap, vec4<f32>(-15.0), vec4<f32>(15.0)));
    }
    return select(s, vec4<f32>(NEG), row == NO_ROW);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // Each invocation takes two neighbouring positions j and j + 1, so each q load serves two K rows.
    let id = gid.x + gid.y * nwg.x * WG;
    let groups = p.n_head / QH;
    let pairs = (p.n_splits + 1u) / 2u;
    let j = (id % pairs) * 2u;
    let g = (id / pairs) % groups;
    let slot = id / (pairs * groups);
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
    let second = j + 1u < seen.y;
    let row_a = kv_row(info.z, seen.x + j, p.max_blocks);
    let row_b = select(NO_ROW, kv_row(info.z, seen.x + j + 1u, p.max_blocks), second);
    // A missing row reads row 0 (any valid row) and scores -FLT_MAX: no branch around the loop.
    let kv_col = (h0 / (p.n_head / p.n_kv_head)) * HD4;
    let ka = select(row_a, 0u, row_a == NO_ROW) * p.n_kv_head * HD4 + kv_col;
    let kb = select(row_b, 0u, row_b == NO_ROW) * p.n_kv_head * HD4 + kv_col;
    let q0 = (t * p.qkv_stride) / 4u + h0 * HD4;
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var b0 = vec4<f32>(0.0);
    var b1 = vec4<f32>(0.0);
    var b2 = vec4<f32>(0.0);
    var b3 = vec4<f32>(0.0);
    for (var i = 0u; i < HD4; i++) {
        let k = vec4<f32>(k_cache[ka + i]);
        let kk = vec4<f32>(k_cache[kb + i]);
        let q = qkv[q0 + i];
        a0 += q * k;
        b0 += q * kk;
        if (QH > 1u) {
            let q = qkv[q0 + HD4 + i];
            a1 += q * k;
            b1 += q * kk;
        }
        if (QH > 2u) {
            let q = qkv[q0 + 2u * HD4 + i];
            a2 += q * k;
            b2 += q * kk;
        }
        if (QH > 3u) {
            let q = qkv[q0 + 3u * HD4 + i];
            a3 += q * k;
            b3 += q * kk;
        }
    }
    let r = (t * groups + g) * p.n_splits + j;
    dst[r] = finish_scores(a0, a1, a2, a3, row_a);
    if (second) {
        dst[r + 1u] = finish_scores(b0, b1, b2, b3, row_b);
    }
}
