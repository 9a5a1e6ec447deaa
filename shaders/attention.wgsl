// Causal attention over the paged KV cache, for decode and prefill alike. For token t (sequence slot, position
// pos) and query head h: out[t, h] = sum_j softmax_j(c(q . k_j * scale)) v_j over the positions j of the same
// sequence with pos - window < j <= pos (window 0: all of 0..pos), where c is the optional soft cap
// c(s) = softcap * tanh(s / softcap), and k, v come from kv head h / (n_head / n_kv_head) (grouped-query attention).
// The token's own k and v were stored by rope_store earlier in the step, so a prefill chunk is causal among itself.
//
// Work split (flash-decoding): each token's positions are cut into n_splits contiguous ranges and one invocation
// handles one (token, head, range) with an online softmax, so a single decode token still spreads over many
// invocations and no invocation waits at a barrier. Positions are taken one at a time and the accumulator is
// rescaled only when a new maximum appears (a few times per range); scoring tiles of positions into private
// arrays first measured 3-6x slower on lavapipe, where such arrays live in memory.
// With n_splits = 1 the result goes straight to `dst` = out; otherwise `dst` receives one partial record per
// (token, head, range), merged by attention_combine.wgsl:
//   record r = (t * n_head + h) * n_splits + range, REC = HD4 + 1 vec4s each:
//   dst[r * REC] = (running max m, sum of exp(score - m), 0, 0), dst[r * REC + 1 + i] = unnormalised output[4i..].
//!include attention_io.wgsl

const HD4: u32 = {{HD4}}u;  // head_dim / 4
const WG: u32 = {{WG}}u;
const MIN_RANGE: u32 = {{MIN_RANGE}}u;  // fewest positions worth a range of their own
const NEG: f32 = -3.4028234663852886e38;

var<private> q: array<vec4<f32>, HD4>;
var<private> acc: array<vec4<f32>, HD4>;

fn score(row: u32) -> f32 {
    var d = vec4<f32>(0.0);
    for (var i = 0u; i < HD4; i++) {
        d += q[i] * vec4<f32>(k_cache[row + i]);
    }
    var s = (d.x + d.y + d.z + d.w) * p.scale;
    if (p.softcap != 0.0) {
        // tanh saturates long before 15; the clamp keeps exp-based tanh implementations away from inf / inf
        s = p.softcap * tanh(clamp(s / p.softcap, -15.0, 15.0));
    }
    return s;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // Head varies fastest: neighbouring invocations of one kv group read the same cache rows.
    let id = gid.x + gid.y * nwg.x * WG;
    let h = id % p.n_head;
    let split = (id / p.n_head) % p.n_splits;
    let t = id / (p.n_head * p.n_splits);
    if (t >= step.n_tokens) {
        return;
    }
    let info = tokens[t];
    let pos = info.y;
    var lo = 0u;
    if (p.window != 0u && pos >= p.window) {
        lo = pos + 1u - p.window;
    }
    // Short contexts leave the later ranges empty rather than cutting the positions into slivers.
    let len = pos + 1u - lo;
    let chunk = max((len + p.n_splits - 1u) / p.n_splits, MIN_RANGE);
    let start = lo + min(split * chunk, len);
    let end = min(start + chunk, pos + 1u);

    let kv_col = (h / (p.n_head / p.n_kv_head)) * HD4;
    let q0 = (t * p.qkv_stride) / 4u + h * HD4;
    for (var i = 0u; i < HD4; i++) {
        q[i] = qkv[q0 + i];
        acc[i] = vec4<f32>(0.0);
    }
    var m = NEG;
    var l = 0.0;
    for (var j = start; j < end; j++) {
        let row = kv_row(info.z, j, p.max_blocks);
        if (row == NO_ROW) {
            continue;
        }
        let base = row * p.n_kv_head * HD4 + kv_col;
        let s = score(base);
        if (s > m) {
            let rescale = exp(m - s);
            l *= rescale;
            for (var i = 0u; i < HD4; i++) {
                acc[i] *= rescale;
            }
            m = s;
        }
        let w = exp(s - m);
        l += w;
        for (var i = 0u; i < HD4; i++) {
            acc[i] += w * vec4<f32>(v_cache[base + i]);
        }
    }

    if (p.n_splits == 1u) {
        let inv = select(0.0, 1.0 / l, l > 0.0);
        let o = (t * p.out_stride) / 4u + h * HD4;
        for (var i = 0u; i < HD4; i++) {
            dst[o + i] = acc[i] * inv;
        }
        return;
    }
    let r = ((t * p.n_head + h) * p.n_splits + split) * (HD4 + 1u);
    dst[r] = vec4<f32>(m, l, 0.0, 0.0);
    for (var i = 0u; i < HD4; i++) {
        dst[r + 1u + i] = acc[i];
    }
}
