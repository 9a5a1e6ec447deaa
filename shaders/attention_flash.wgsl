// Causal attention over the paged KV cache, the same result as attention.wgsl (see there for the definition,
// windows, soft cap, grouped-query heads and the partial-record layout of split ranges), shaped for GPUs:
// flash attention with workgroups that share K/V loads.
//
// One workgroup handles a tile of TT consecutive tokens of the step x QH query heads of one kv group x one
// range of positions. It walks the range in tiles of TP positions:
//   1. the workgroup loads the tile's K rows of its kv head into workgroup memory: neighbouring lanes read
//      neighbouring vec4s of a row (coalesced), each row once for all TT * QH query rows;
//   2. each lane scores (query row, position) pairs from workgroup memory, masked to the token's own sequence,
//      causal range, window and the workgroup's range;
//   3. per query row, one lane folds the tile into the row's running max and sum (online softmax) and turns the
//      scores into weights; meanwhile the workgroup loads the V rows over the K rows;
//   4. each lane accumulates its output elements (query row, vec4 column) from the weights and V tile.
// No reduction crosses lanes: a lane owns whole dot products and whole output elements, so the only
// synchronisation is the four barriers per tile.
//
// Tokens of one tile may belong to different sequences (several sequences in one step): the tile's tokens are
// taken sequence by sequence, each sequence walking the union of its tokens' visible positions; a token outside
// the sequence being walked sees every position masked and keeps its running state.
//!include attention_io.wgsl

const HD4: u32 = {{HD4}}u;  // head_dim / 4
const WG: u32 = {{WG}}u;    // lanes per workgroup
const TT: u32 = {{TT}}u;    // tokens per workgroup
const QH: u32 = {{QH}}u;    // query heads per workgroup (all of one kv head; divides n_head / n_kv_head)
const TP: u32 = {{TP}}u;    // positions per tile
const MIN_RANGE: u32 = {{MIN_RANGE}}u;  // fewest positions worth a range of their own
const ROWS: u32 = TT * QH;  // query rows per workgroup
const OUTS: u32 = (ROWS * HD4 + WG - 1u) / WG;  // output vec4s per lane

var<workgroup> qs: array<vec4<f32>, ROWS * HD4>;  // the query rows, pre-scaled
var<workgroup> kv: array<vec4<f32>, TP * HD4>;   // the tile's K rows, then its V rows
var<workgroup> sc: array<f32, ROWS * TP>;        // scores, then softmax weights
var<workgroup> row_ok: array<u32, TP>;           // whether the tile's position has a cache row
var<workgroup> run_m: array<f32, ROWS>;          // running max per query row
var<workgroup> run_l: array<f32, ROWS>;          // running sum of exp(score - max)
var<workgroup> rescale: array<f32, ROWS>;        // this tile's factor on the row's earlier accumulation

// First position a token at `pos` sees.
fn first_visible(pos: u32) -> u32 {
    if (p.window != 0u && pos >= p.window) {
        return pos + 1u - p.window;
    }
    return 0u;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n_qgroups = p.n_head / QH;
    let wid = wg.x + wg.y * nwg.x;
    let qg = wid % n_qgroups;
    let split = (wid / n_qgroups) % p.n_splits;
    let t0 = (wid / (n_qgroups * p.n_splits)) * TT;
    if (t0 >= step.n_tokens) {
        return;
    }
    let h0 = qg * QH;
    let kv_col = (h0 / (p.n_head / p.n_kv_head)) * HD4;
    let kv_stride = p.n_kv_head * HD4;

    for (var e = lid; e < ROWS * HD4; e += WG) {
        let r = e / HD4;
        let t = t0 + r / QH;
        var q = vec4<f32>(0.0);
        if (t < step.n_tokens) {
            q = qkv[(t * p.qkv_stride) / 4u + (h0 + r % QH) * HD4 + e % HD4] * p.scale;
        }
        qs[e] = q;
    }
    for (var r = lid; r < ROWS; r += WG) {
        run_m[r] = NEG;
        run_l[r] = 0.0;
    }
    var acc: array<vec4<f32>, OUTS>;
    for (var o = 0u; o < OUTS; o++) {
        acc[o] = vec4<f32>(0.0);
    }
    workgroupBarrier();

    // One pass per distinct sequence among the tile's tokens (the first token of each names it). Everything
    // deciding the passes and tiles comes from uniform and read-only data, so all lanes take the same path.
    for (var g = 0u; g < TT; g++) {
        if (t0 + g >= step.n_tokens) {
            break;
        }
        let slot = tokens[t0 + g].z;
        var first = true;
        var lo = 0xffffffffu;
        var hi = 0u;  // one past the last visible position
        for (var u = 0u; u < TT; u++) {
            let t = t0 + u;
            if (t < step.n_tokens && tokens[t].z == slot) {
                first = first && u >= g;
                let pos = tokens[t].y;
                lo = min(lo, first_visible(pos));
                hi = max(hi, pos + 1u);
            }
        }
        if (!first) {
            continue;
        }
        // This workgroup's range of the sequence's positions; short spans leave later ranges empty.
        let len = hi - lo;
        let chunk = max((len + p.n_splits - 1u) / p.n_splits, MIN_RANGE);
        let start = lo + min(split * chunk, len);
        let end = min(start + chunk, hi);

        for (var j0 = start; j0 < end; j0 += TP) {
            for (var e = lid; e < TP * HD4; e += WG) {
                let j = j0 + e / HD4;
                var row = NO_ROW;
                if (j < end) {
                    row = kv_row(slot, j, p.max_blocks);
                }
                var k = vec4<f32>(0.0);
                if (row != NO_ROW) {
                    k = vec4<f32>(k_cache[row * kv_stride + kv_col + e % HD4]);
                }
                kv[e] = k;
                if (e % HD4 == 0u) {
                    row_ok[e / HD4] = select(0u, 1u, row != NO_ROW);
                }
            }
            workgroupBarrier();

            for (var s = lid; s < ROWS * TP; s += WG) {
                let r = s / TP;
                let jj = s % TP;
                let j = j0 + jj;
                let t = t0 + r / QH;
                var score = NEG;
                if (t < step.n_tokens && row_ok[jj] == 1u) {
                    let info = tokens[t];
                    if (info.z == slot && j <= info.y && j >= first_visible(info.y)) {
                        var d = vec4<f32>(0.0);
                        for (var i = 0u; i < HD4; i++) {
                            d += qs[r * HD4 + i] * kv[jj * HD4 + i];
                        }
                        score = d.x + d.y + d.z + d.w;
                        if (p.softcap != 0.0) {
                            // tanh saturates long before 15; the clamp keeps exp-based tanh away from inf / inf
                            score = p.softcap * tanh(clamp(score / p.softcap, -15.0, 15.0));
                        }
                    }
                }
                sc[s] = score;
            }
            workgroupBarrier();

            for (var r = lid; r < ROWS; r += WG) {
                let m_old = run_m[r];
                var m = m_old;
                for (var jj = 0u; jj < TP; jj++) {
                    m = max(m, sc[r * TP + jj]);
                }
                var sum = 0.0;
                for (var jj = 0u; jj < TP; jj++) {
                    let s = sc[r * TP + jj];
                    let w = select(0.0, exp(s - m), s > NEG);
                    sc[r * TP + jj] = w;
                    sum += w;
                }
                let f = select(1.0, exp(m_old - m), m_old > NEG);
                rescale[r] = f;
                run_l[r] = run_l[r] * f + sum;
                run_m[r] = m;
            }
            for (var e = lid; e < TP * HD4; e += WG) {
                var v = vec4<f32>(0.0);
                let jj = e / HD4;
                if (row_ok[jj] == 1u) {
                    v = vec4<f32>(v_cache[kv_row(slot, j0 + jj, p.max_blocks) * kv_stride + kv_col + e % HD4]);
                }
                kv[e] = v;
            }
            workgroupBarrier();

            for (var o = 0u; o < OUTS; o++) {
                let e = lid + o * WG;
                if (e < ROWS * HD4) {
                    let r = e / HD4;
                    let i = e % HD4;
                    var a = acc[o] * rescale[r];
                    for (var jj = 0u; jj < TP; jj++) {
                        a += sc[r * TP + jj] * kv[jj * HD4 + i];
                    }
                    acc[o] = a;
                }
            }
            workgroupBarrier();
        }
    }

    for (var o = 0u; o < OUTS; o++) {
        let e = lid + o * WG;
        let r = e / HD4;
        let i = e % HD4;
        let t = t0 + r / QH;
        if (e >= ROWS * HD4 || t >= step.n_tokens) {
            continue;
        }
        let h = h0 + r % QH;
        let l = run_l[r];
        if (p.n_splits == 1u) {
            dst[(t * p.out_stride) / 4u + h * HD4 + i] = acc[o] * select(0.0, 1.0 / l, l > 0.0);
        } else {
            let rec = ((t * p.n_head + h) * p.n_splits + split) * (HD4 + 1u);
            if (i == 0u) {
                dst[rec] = vec4<f32>(run_m[r], l, 0.0, 0.0);
            }
            dst[rec + 1u + i] = acc[o];
        }
    }
}
