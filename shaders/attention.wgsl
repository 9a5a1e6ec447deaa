// Causal attention over the paged KV cache, for decode and prefill alike. For token t (sequence slot, position
// pos) and query head h: out[t, h] = sum_j softmax_j(c(q . k_j * scale)) v_j over the positions j of the same
// sequence with pos - window < j <= pos (window 0: all of 0..pos), where c is the optional soft cap
// c(s) = softcap * tanh(s / softcap), and k, v come from kv head h / (n_head / n_kv_head) (grouped-query attention).
// The token's own k and v were stored by rope_store earlier in the step, so a prefill chunk is causal among itself.
//
// Work split (flash-decoding): each token's positions are cut into n_splits contiguous ranges and one invocation
// handles one (token, QH heads of one kv group, range) with an online softmax, so a single decode token still
// spreads over several invocations and no invocation waits at a barrier. QH > 1 (the "grouped" kernel) loads each
// K/V row once for its heads: on CPU emulators, where every storage load is a scalar loop over the SIMD lanes,
// that is what pays. Positions are taken one at a time and the accumulators are rescaled only when a new maximum
// appears (a few times per range); scoring tiles of positions into private arrays first measured 3-6x slower on
// lavapipe, where such arrays live in memory.
// With n_splits = 1 the result goes straight to `dst` = out; otherwise `dst` receives one partial record per
// (token, head, range), merged by attention_combine.wgsl:
//   record r = (t * n_head + h) * n_splits + range, REC = HD4 + 1 vec4s each:
//   dst[r * REC] = (running max m, sum of exp(score - m), 0, 0), dst[r * REC + 1 + i] = unnormalised output[4i..].
//!include attention_io.wgsl
//!include token_order.wgsl

const HD4: u32 = {{HD4}}u;  // head_dim / 4
const QH: u32 = {{QH}}u;    // query heads per invocation (1 to 4, of one kv group): they share every K/V load
const WG: u32 = {{WG}}u;
const MIN_RANGE: u32 = {{MIN_RANGE}}u;  // fewest positions worth a range of their own
const LANE_TOKENS: u32 = 8u;  // consecutive tokens kept together when token slots are reordered (token_order.wgsl)

// Head hh of the invocation's at [hh * HD4, (hh + 1) * HD4). Loops over heads are written out under `if (QH > hh)`
// on a constant: lavapipe counts every loop iteration of an invocation against one limit (about 65,535, then it
// stops the invocation), so a loop over heads inside the loop over a row would divide the positions a range may
// walk by QH.
var<private> q: array<vec4<f32>, QH * HD4>;
var<private> acc: array<vec4<f32>, QH * HD4>;

// The scores of the invocation's heads (component hh: head hh; unused components 0) against cache row `row`.
fn scores(row: u32) -> vec4<f32> {
    var d0 = vec4<f32>(0.0);
    var d1 = vec4<f32>(0.0);
    var d2 = vec4<f32>(0.0);
    var d3 = vec4<f32>(0.0);
    for (var i = 0u; i < HD4; i++) {
        let k = vec4<f32>(k_cache[row + i]);
        d0 += q[i] * k;
        if (QH > 1u) {
            d1 += q[HD4 + i] * k;
        }
        if (QH > 2u) {
            d2 += q[2u * HD4 + i] * k;
        }
        if (QH > 3u) {
            d3 += q[3u * HD4 + i] * k;
        }
    }
    let one = vec4<f32>(1.0);
    var s = vec4<f32>(dot(d0, one), dot(d1, one), dot(d2, one), dot(d3, one)) * p.scale;
    if (p.softcap != 0.0) {
        // tanh saturates long before 15; the clamp keeps exp-based tanh implementations away from inf / inf
        s = p.softcap * tanh(clamp(s / p.softcap, vec4<f32>(-15.0), vec4<f32>(15.0)));
    }
    return s;
}

// Each head's accumulator times its component of `r`.
fn rescale(r: vec4<f32>) {
    for (var i = 0u; i < HD4; i++) {
        acc[i] *= r.x;
        if (QH > 1u) {
            acc[HD4 + i] *= r.y;
        }
        if (QH > 2u) {
            acc[2u * HD4 + i] *= r.z;
        }
        if (QH > 3u) {
            acc[3u * HD4 + i] *= r.w;
        }
    }
}

// Each head's accumulator plus its component of `w` times the V row at `row`.
fn accumulate(w: vec4<f32>, row: u32) {
    for (var i = 0u; i < HD4; i++) {
        let v = vec4<f32>(v_cache[row + i]);
        acc[i] += w.x * v;
        if (QH > 1u) {
            acc[HD4 + i] += w.y * v;
        }
        if (QH > 2u) {
            acc[2u * HD4 + i] += w.z * v;
        }
        if (QH > 3u) {
            acc[3u * HD4 + i] += w.w * v;
        }
    }
}

// Head hh's result: the output row, or (n_splits > 1) its partial record.
fn finish(t: u32, h: u32, split: u32, hh: u32, m: f32, l: f32) {
    let a = hh * HD4;
    if (p.n_splits == 1u) {
        let inv = select(0.0, 1.0 / l, l > 0.0);
        let o = (t * p.out_stride) / 4u + h * HD4;
        for (var i = 0u; i < HD4; i++) {
            dst[o + i] = acc[a + i] * inv;
        }
        return;
    }
    let r = ((t * p.n_head + h) * p.n_splits + split) * (HD4 + 1u);
    dst[r] = vec4<f32>(m, l, 0.0, 0.0);
    for (var i = 0u; i < HD4; i++) {
        dst[r + 1u + i] = acc[a + i];
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // Heads vary fastest: neighbouring invocations of one kv group read the same cache rows.
    let id = gid.x + gid.y * nwg.x * WG;
    let groups = p.n_head / QH;
    let h0 = (id % groups) * QH;
    let split = (id / groups) % p.n_splits;
    // Runs of LANE_TOKENS consecutive tokens stay together, so the lanes a CPU emulator runs as one SIMD batch
    // walk similar lengths of context.
    let slot = id / (groups * p.n_splits);
    if (slot >= p.slots) {
        return;  // past the grid's last slot (it is padded to whole workgroups)
    }
    let t = step_token(slot / LANE_TOKENS, p.slots / LANE_TOKENS) * LANE_TOKENS + slot % LANE_TOKENS;
    if (t >= step.n_tokens) {
        return;
    }
    let info = tokens[t];
    let pos = info.y;
    let seen = visible(pos);
    let lo = seen.x;
    let len = seen.y;
    // Short contexts leave the later ranges empty rather than cutting the positions into slivers.
    let chunk = max((len + p.n_splits - 1u) / p.n_splits, MIN_RANGE);
    let start = lo + min(split * chunk, len);
    let end = min(start + chunk, pos + 1u);

    let kv_col = (h0 / (p.n_head / p.n_kv_head)) * HD4;
    let q0 = (t * p.qkv_stride) / 4u + h0 * HD4;
    for (var i = 0u; i < QH * HD4; i++) {
        q[i] = qkv[q0 + i];
        acc[i] = vec4<f32>(0.0);
    }
    var m = vec4<f32>(NEG);
    var l = vec4<f32>(0.0);
    for (var j = start; j < end; j++) {
        let row = kv_row(info.z, j, p.max_blocks);
        if (row == NO_ROW) {
            continue;
        }
        let base = row * p.n_kv_head * HD4 + kv_col;
        let s = scores(base);
        if (any(s > m)) {  // a new maximum: rescale what was summed under the old one (a few times per range)
            let m_new = max(m, s);
            let r = exp(m - m_new);
            l *= r;
            rescale(r);
            m = m_new;
        }
        let w = exp(s - m);
        l += w;
        accumulate(w, base);
    }

    finish(t, h0, split, 0u, m.x, l.x);
    if (QH > 1u) {
        finish(t, h0 + 1u, split, 1u, m.y, l.y);
    }
    if (QH > 2u) {
        finish(t, h0 + 2u, split, 2u, m.z, l.z);
    }
    if (QH > 3u) {
        finish(t, h0 + 3u, split, 3u, m.w, l.w);
    }
}
