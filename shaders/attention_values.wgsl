// Attention in two passes for CPU emulators, pass 2 (pass 1 and the layout of the scores: attention_scores.wgsl):
// one invocation per (token, QH heads of one kv group, four elements of a head) takes the softmax of each head's
// scores and sums those four elements of the V rows under it, out[t, h, 4i..4i+3] = sum_j e^(s_j - max) v_j[4i..]
// / sum_j e^(s_j - max), with one load of each V element for the group's heads. Every invocation re-reads the
// scores rather than sharing the max and the sum through workgroup memory and a barrier, which CPU emulators run
// as separate passes over the workgroup; the softmax is online (rescaled when a new maximum appears).
// lavapipe stops an invocation once its loops have run about 65,535 iterations in all: the loop over the positions
// here bounds the context this kernel may take (variants.SCORES_MAX_SPAN).
//!include attention_io.wgsl
//!include token_order.wgsl

@group(0) @binding(8) var<storage, read_write> out: array<vec4<f32>>;  // [T, out_stride / 4]

const HD4: u32 = {{HD4}}u;  // head_dim / 4
const QH: u32 = {{QH}}u;    // query heads per score record (attention_scores.wgsl)
const WG: u32 = {{WG}}u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let id = gid.x + gid.y * nwg.x * WG;
    let groups = p.n_head / QH;
    let i = id % HD4;
    let g = (id / HD4) % groups;
    let slot = id / (HD4 * groups);
    if (slot >= p.slots) {
        return;
    }
    let t = step_token(slot, p.slots);
    if (t >= step.n_tokens) {
        return;
    }
    let info = tokens[t];
    let seen = visible(info.y);
    let n = min(seen.y, p.n_splits);  // (the recorded span holds every position a token sees)
    let first = (t * groups + g) * p.n_splits;
    let h0 = g * QH;
    let v0 = (h0 / (p.n_head / p.n_kv_head)) * HD4 + i;
    var m = vec4<f32>(NEG);
    var l = vec4<f32>(0.0);
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    // Block by block: one block-table load per run of positions in one cache block.
    for (var j = 0u; j < n;) {
        let pos = seen.x + j;
        let run = min(BLOCK_TOKENS - pos % BLOCK_TOKENS, n - j);
        let row0 = kv_row(info.z, pos, p.max_blocks);
        for (var r = 0u; r < run && row0 != NO_ROW; r++) {
            let s = dst[first + j + r];
            if (any(s > m)) {  // a new maximum: rescale what was summed under the old one
                let m_new = max(m, s);
                let k = exp(m - m_new);
                l *= k;
                a0 *= k.x;
                a1 *= k.y;
                a2 *= k.z;
                a3 *= k.w;
                m = m_new;
            }
            let e = exp(s - m);
            l += e;
            let v = vec4<f32>(v_cache[(row0 + r) * p.n_kv_head * HD4 + v0]);
            a0 += e.x * v;
            if (QH > 1u) {
                a1 += e.y * v;
            }
            if (QH > 2u) {
                a2 += e.z * v;
            }
            if (QH > 3u) {
                a3 += e.w * v;
            }
        }
        j += run;
    }
    let inv = select(vec4<f32>(0.0), 1.0 / l, l > vec4<f32>(0.0));
    let o = (t * p.out_stride) / 4u + h0 * HD4 + i;
    out[o] = a0 * inv.x;
    if (QH > 1u) {
        out[o + HD4] = a1 * inv.y;
    }
    if (QH > 2u) {
        out[o + 2u * HD4] = a2 * inv.z;
    }
    if (QH > 3u) {
        out[o + 3u * HD4] = a3 * inv.w;
    }
}
