// The K largest logits of each row with their indices, sorted by value descending (ties: lower index first), and
// the row's max and sum(exp(logit - max)), so the host turns the K candidates into exact probabilities while only
// a few bytes come back. K = 1 is argmax.
//
// Output record, REC = 4 + 2K u32 words per row (the same layout for the partial records of pass 1):
//   word 0: max logit (f32 bits)      word 1: sum of exp(logit - max) (f32 bits)      words 2, 3: 0
//   words 4 + 2j, 5 + 2j: value (f32 bits) and index of the j-th largest logit, j < K. Rows with fewer than K
//   logits >= -FLT_MAX (the rest being -inf, as masks set them) leave the remaining entries as (-FLT_MAX, 0xffffffff).
// Two passes (PASS): 1 scans CHUNK logits of a row per invocation into a partial record, so one row spreads over
// many invocations; 2 merges a row's partial records into the final one (one invocation per row).
// Rows processed: min(n_rows, step.n_tokens), where `step` is the step uniform or another whose first u32 counts
// the rows that want sampling.

struct Params {
    n_rows: u32,   // rows of logits
    n: u32,        // pass 1: logits per row (vocabulary size); pass 2: partial records per row
    stride: u32,   // pass 1: elements between consecutive rows of logits; pass 2: unused
    chunk: u32,    // pass 1: logits each invocation scans; pass 2: unused
}

struct Step {
    n_tokens: u32,  // tokens in this step (or rows wanting sampling)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> src: array<u32>;  // pass 1: f32 logits; pass 2: partial records
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;

const K: u32 = {{K}}u;
const PASS: u32 = {{PASS}}u;
const REC: u32 = 4u + 2u * K;
const NEG: f32 = -3.4028234663852886e38;
const NO_INDEX: u32 = 0xffffffffu;

var<private> vals: array<f32, K>;
var<private> idxs: array<u32, K>;

fn better(v: f32, i: u32, w: f32, j: u32) -> bool {
    return v > w || (v == w && i < j);
}

// The kept candidates form a heap whose root (entry 0) is the worst of them, so a logit that makes the cut costs
// log2(K) moves instead of the K/2 of an insertion into a sorted list.

// Place (v, i) at the root of the heap of the first n entries and sift it down to where it belongs.
fn sift_down(v: f32, i: u32, n: u32) {
    var at = 0u;
    loop {
        var c = 2u * at + 1u;
        if (c >= n) {
            break;
        }
        if (c + 1u < n && better(vals[c], idxs[c], vals[c + 1u], idxs[c + 1u])) {
            c += 1u;  // the worse child
        }
        if (!better(v, i, vals[c], idxs[c])) {
            break;
        }
        vals[at] = vals[c];
        idxs[at] = idxs[c];
        at = c;
    }
    vals[at] = v;
    idxs[at] = i;
}

// Keep (v, i) if it beats the worst kept candidate; returns false when it does not.
fn offer(v: f32, i: u32) -> bool {
    if (!better(v, i, vals[0], idxs[0])) {
        return false;
    }
    sift_down(v, i, K);
    return true;
}

// Heap sort: the worst candidate moves to the back each round, leaving the list best first.
fn sort_kept() {
    for (var n = K - 1u; n > 0u; n--) {
        let v = vals[n];
        let i = idxs[n];
        vals[n] = vals[0];
        idxs[n] = idxs[0];
        sift_down(v, i, n);
    }
}

fn write_record(r: u32, m: f32, s: f32) {
    sort_kept();
    let o = r * REC;
    dst[o] = bitcast<u32>(m);
    dst[o + 1u] = bitcast<u32>(s);
    dst[o + 2u] = 0u;
    dst[o + 3u] = 0u;
    for (var j = 0u; j < K; j++) {
        dst[o + 4u + 2u * j] = bitcast<u32>(vals[j]);
        dst[o + 5u + 2u * j] = idxs[j];
    }
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y;
    if (row >= min(p.n_rows, step.n_tokens)) {
        return;
    }
    for (var j = 0u; j < K; j++) {
        vals[j] = NEG;
        idxs[j] = NO_INDEX;
    }
    if (PASS == 1u) {
        let c = gid.x;
        let begin = c * p.chunk;
        if (begin >= p.n) {
            return;
        }
        let end = min(begin + p.chunk, p.n);
        var m = NEG;
        for (var i = begin; i < end; i++) {
            let x = bitcast<f32>(src[row * p.stride + i]);
            m = max(m, x);
            offer(x, i);
        }
        // A second pass over the (cached) chunk for sum(exp(x - m)), in runs of 64 terms whose sums go into `s`,
        // so rounding grows with 64 + chunk/64 additions rather than with chunk.
        var s = 0.0;
        for (var r = begin; r < end; r += 64u) {
            var run = 0.0;
            for (var i = r; i < min(r + 64u, end); i++) {
                run += exp(bitcast<f32>(src[row * p.stride + i]) - m);
            }
            s += run;
        }
        write_record(row * ((p.n + p.chunk - 1u) / p.chunk) + c, m, s);
        return;
    }
    if (gid.x != 0u) {
        return;
    }
    let first = row * p.n;
    var m = NEG;
    for (var c = 0u; c < p.n; c++) {
        m = max(m, bitcast<f32>(src[(first + c) * REC]));
    }
    var s = 0.0;
    for (var c = 0u; c < p.n; c++) {
        let o = (first + c) * REC;
        s += bitcast<f32>(src[o + 1u]) * exp(bitcast<f32>(src[o]) - m);
        // A partial list is sorted, so its first entry that does not make the cut ends it.
        for (var j = 0u; j < K; j++) {
            if (!offer(bitcast<f32>(src[o + 4u + 2u * j]), src[o + 5u + 2u * j])) {
                break;
            }
        }
    }
    write_record(row, m, s);
}
