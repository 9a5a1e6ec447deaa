// The gated delta rule (see gated_delta.wgsl for the definition), chunk by chunk: the prefill form. The result is
// the token-by-token one; the work is shaped as small matrix products over C tokens at a time (the WY /
// UT-transform form of llama.cpp's prefill graph). Within a chunk of n <= C tokens of one sequence and value head,
// with S the state at the chunk's start, G_t the sum of g over the chunk's tokens up to t, D[t][s] = exp(G_t - G_s)
// and q, k normalised (q also scaled):
//     r_t = beta_t * (v_t - exp(G_t) * S k_t)
//     u_t = r_t - sum_{s<t} beta_t D[t][s] (k_t . k_s) u_s        the triangular solve: u = (I + A)^-1 r
//     o_t = exp(G_t) * S q_t + sum_{s<=t} D[t][s] (q_t . k_s) u_s
//     S  <- exp(G_n) * S + sum_s exp(G_n - G_s) u_s k_s^T
// Every value row j of S solves its own triangular system (A is shared, r and u are per row), so no inverse is
// formed and the solve needs no barrier.
//
// One workgroup per (WG value rows, value head, sequence): it walks its sequence's tokens in the step chunk by
// chunk. Per chunk, the workgroup stages the chunk's normalised q and k in tiles of B key columns in workgroup
// memory; from each tile it accumulates the chunk's q.k and k.k products (one triangle each of `gram`) and every
// row's S q_t and S k_t, reading each state row once per chunk. A second pass over the tiles, keys decayed to the
// chunk's end, updates the state rows. A sequence at position 0 starts from a zero state; the last chunk of a
// sequence may be partial. Workgroup memory: 4 * (2 * C * B + C * C + 4 * C) bytes (12.8 KB at C = B = 32).
// Workgroups are laid out per token (z) like the decode form's invocations; those whose token does not start a
// sequence of the step leave at once.

struct Params {
    n_k_heads: u32,
    n_v_heads: u32,
    head_dim: u32,  // key and value head size
    qkv_stride: u32,  // elements between tokens in qkv: q (n_k_heads heads), k (n_k_heads), v (n_v_heads)
    gb_stride: u32,  // elements between tokens in gb: g (n_v_heads), then beta (n_v_heads)
    out_stride: u32,  // elements between tokens in out
    eps: f32,
    scale: f32,  // applied to q . S (1 / sqrt(head_dim))
}

struct Step {
    n_tokens: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> gb: array<f32>;
@group(0) @binding(4) var<storage, read> tokens: array<vec4<u32>>;  // (id, position, sequence slot, 0) per token
@group(0) @binding(5) var<storage, read_write> state: array<f32>;  // [slot][v head][row j][column i]
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

const C: u32 = {{C}}u;    // tokens per chunk
const B: u32 = {{B}}u;    // key columns per tile
const WG: u32 = {{WG}}u;  // value rows per workgroup

var<workgroup> qt: array<f32, C * B>;    // [token][column] of the tile: normalised, scaled queries
var<workgroup> kt: array<f32, C * B>;    // normalised keys (in the state pass, decayed to the chunk's end)
var<workgroup> gram: array<f32, C * C>;  // [t][s], s <= t: q_t . k_s, then times D; [s][t], s < t: k_t . k_s,
                                         // then times beta_t D[t][s] (the solve's A, transposed)
var<workgroup> g_cum: array<f32, C>;     // G_t
var<workgroup> beta: array<f32, C>;
var<workgroup> q_inv: array<f32, C>;     // scale / |q_t|
var<workgroup> k_inv: array<f32, C>;     // 1 / |k_t|
var<workgroup> leads: u32;               // whether the workgroup's token starts its sequence in the step
var<workgroup> chunk_n: u32;             // tokens in the chunk (lane 0 counts them)

fn inv_norm(base: u32) -> f32 {
    var sum = 0.0;
    for (var i = 0u; i < p.head_dim; i++) {
        sum += qkv[base + i] * qkv[base + i];
    }
    return inverseSqrt(sum + p.eps);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.y;
    let t0 = wg.z;
    if (t0 >= step.n_tokens) {
        return;
    }
    let slot = tokens[t0].z;
    if (lid == 0u) {
        leads = select(1u, 0u, t0 > 0u && tokens[t0 - 1u].z == slot);
    }
    if (workgroupUniformLoad(&leads) == 0u) {
        return;  // not the first token of its sequence in this step
    }
    let d = p.head_dim;
    let j = wg.x * WG + lid;
    let mine = j < d;  // lanes past the head's last row only help with tiles
    let row = ((slot * p.n_v_heads + h) * d + j) * d;
    if (mine && tokens[t0].y == 0u) {
        for (var i = 0u; i < d; i++) {
            state[row + i] = 0.0;
        }
    }
    let kh = h % p.n_k_heads;
    let q_col = kh * d;
    let k_col = (p.n_k_heads + kh) * d;
    let v_col = 2u * p.n_k_heads * d + h * d;
    var sk: array<f32, C>;  // S k_t of the chunk's start state, then r_t, then u_t (this lane's row)
    var sq: array<f32, C>;  // S q_t
    var sv: array<f32, B>;  // the tile's columns of this lane's state row
    var c0 = t0;
    loop {
        if (lid == 0u) {
            var n = 0u;
            while (n < C && c0 + n < step.n_tokens && tokens[c0 + n].z == slot) {
                n++;
            }
            chunk_n = n;
        }
        let n = workgroupUniformLoad(&chunk_n);
        if (n == 0u) {
            break;
        }
        for (var c = lid; c < C; c += WG) {
            if (c < n) {
                let t = c0 + c;
                var gsum = 0.0;
                for (var s = 0u; s <= c; s++) {
                    gsum += gb[(c0 + s) * p.gb_stride + h];
                }
                g_cum[c] = gsum;
                beta[c] = gb[t * p.gb_stride + p.n_v_heads + h];
                q_inv[c] = inv_norm(t * p.qkv_stride + q_col) * p.scale;
                k_inv[c] = inv_norm(t * p.qkv_stride + k_col);
            }
        }
        for (var e = lid; e < C * C; e += WG) {
            gram[e] = 0.0;
        }
        for (var c = 0u; c < C; c++) {
            sk[c] = 0.0;
            sq[c] = 0.0;
        }
        workgroupBarrier();

        // Pass 1: products of the chunk's q and k with each other and with the state rows.
        for (var col0 = 0u; col0 < d; col0 += B) {
            for (var e = lid; e < C * B; e += WG) {
                let c = e / B;
                let i = col0 + e % B;
                var qv = 0.0;
                var kv = 0.0;
                if (c < n && i < d) {
                    let base = (c0 + c) * p.qkv_stride;
                    qv = qkv[base + q_col + i] * q_inv[c];
                    kv = qkv[base + k_col + i] * k_inv[c];
                }
                qt[e] = qv;
                kt[e] = kv;
            }
            workgroupBarrier();
            for (var e = lid; e < C * C; e += WG) {
                let t = e / C;
                let s = e % C;
                if (s <= t && t < n) {
                    var qk = 0.0;
                    var kk = 0.0;
                    for (var i = 0u; i < B; i++) {
                        qk += qt[t * B + i] * kt[s * B + i];
                        kk += kt[t * B + i] * kt[s * B + i];
                    }
                    gram[e] += qk;
                    if (s < t) {
                        gram[s * C + t] += kk;
                    }
                }
            }
            if (mine) {
                for (var i = 0u; i < B; i++) {
                    sv[i] = select(0.0, state[row + col0 + i], col0 + i < d);
                }
                for (var c = 0u; c < n; c++) {
                    var a = 0.0;
                    var b = 0.0;
                    for (var i = 0u; i < B; i++) {
                        a += kt[c * B + i] * sv[i];
                        b += qt[c * B + i] * sv[i];
                    }
                    sk[c] += a;
                    sq[c] += b;
                }
            }
            workgroupBarrier();
        }
        for (var e = lid; e < C * C; e += WG) {
            let t = e / C;
            let s = e % C;
            if (s <= t && t < n) {
                let decay = exp(g_cum[t] - g_cum[s]);
                gram[e] *= decay;
                if (s < t) {
                    gram[s * C + t] *= beta[t] * decay;
                }
            }
        }
        workgroupBarrier();

        // The triangular solve and the outputs, one state row per lane.
        if (mine) {
            for (var t = 0u; t < n; t++) {
                let r = beta[t] * (qkv[(c0 + t) * p.qkv_stride + v_col + j] - exp(g_cum[t]) * sk[t]);
                var acc = 0.0;
                for (var s = 0u; s < t; s++) {
                    acc += gram[s * C + t] * sk[s];
                }
                sk[t] = r - acc;
            }
            for (var t = 0u; t < n; t++) {
                var o = exp(g_cum[t]) * sq[t];
                for (var s = 0u; s <= t; s++) {
                    o += gram[t * C + s] * sk[s];
                }
                out[(c0 + t) * p.out_stride + h * d + j] = o;
            }
        }

        // Pass 2: the state at the chunk's end.
        let g_last = g_cum[n - 1u];
        for (var col0 = 0u; col0 < d; col0 += B) {
            for (var e = lid; e < C * B; e += WG) {
                let c = e / B;
                let i = col0 + e % B;
                var kv = 0.0;
                if (c < n && i < d) {
                    kv = qkv[(c0 + c) * p.qkv_stride + k_col + i] * k_inv[c] * exp(g_last - g_cum[c]);
                }
                kt[e] = kv;
            }
            workgroupBarrier();
            if (mine) {
                let keep = exp(g_last);
                for (var i = 0u; i < B && col0 + i < d; i++) {
                    var s_new = keep * state[row + col0 + i];
                    for (var c = 0u; c < n; c++) {
                        s_new += sk[c] * kt[c * B + i];
                    }
                    state[row + col0 + i] = s_new;
                }
            }
            workgroupBarrier();
        }
        c0 += n;
        if (n < C) {
            break;  // the sequence ended inside this chunk
        }
    }
}
