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
// One workgroup per (WG * R value rows, value head, sequence), a whole head where it fits: it walks its sequence's
// tokens in the step chunk by chunk. Per chunk, the workgroup stages the chunk's normalised q and k in tiles of
// 4 * B4 key columns in workgroup memory; from each tile it accumulates the chunk's q.k and k.k products (one
// triangle each of `gram`, a lane taking four at a time) and every row's S q_t and S k_t, reading each state row
// once per chunk. A lane owns R state rows (j0, j0 + WG, ...), so each load from a tile serves R rows (on CPU
// emulators loads set the speed; variants.py chooses R per adapter class). A second pass over the tiles, keys
// decayed to the chunk's end, updates the state rows. A sequence at position 0 starts from a zero state; the last
// chunk of a sequence may be partial. Heads are read as vec4s: head_dim must be a multiple of 4.
// Workgroup memory: 4 * (8 * C * B4 + C * C + 4 * C) + 8 bytes (12.8 KB at C = 32, B4 = 8; the default WebGPU
// limit is 16 KB). Per lane: 2 * R * C floats of S k, S q and the solve, 4 * R * B4 of state.
// Workgroups are laid out per token (z) like the decode form's invocations; those whose token does not start a
// sequence of the step leave at once. A long step may be cut into several dispatches, each walking a window of
// n_chunks chunks of every sequence (the state in between lives in `state`): on lavapipe an invocation stops
// early, without a word, once its loops have run about 65535 iterations, which at head size 128 is about 12
// chunks (variants.py chooses the window).

struct Params {
    n_k_heads: u32,
    n_v_heads: u32,
    head_dim: u32,  // key and value head size
    qkv_stride: u32,  // elements between tokens in qkv: q (n_k_heads heads), k (n_k_heads), v (n_v_heads)
    gb_stride: u32,  // elements between tokens in gb: g (n_v_heads), then beta (n_v_heads)
    out_stride: u32,  // elements between tokens in out
    eps: f32,
    scale: f32,  // applied to q . S (1 / sqrt(head_dim))
    first_chunk: u32,  // the first chunk of each sequence this dispatch walks
    n_chunks: u32,  // the most chunks it walks (the rest of a long step is the next dispatch's)
}

struct Step {
    n_tokens: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> qkv: array<vec4<f32>>;  // strides and heads in multiples of 4
@group(0) @binding(3) var<storage, read> gb: array<f32>;
@group(0) @binding(4) var<storage, read> tokens: array<vec4<u32>>;  // (id, position, sequence slot, 0) per token
@group(0) @binding(5) var<storage, read_write> state: array<vec4<f32>>;  // [slot][v head][row j][column i]
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

const C: u32 = {{C}}u;    // tokens per chunk
const B4: u32 = {{B4}}u;  // key columns per tile, in vec4s
const R: u32 = {{R}}u;    // value rows per lane: each tile load serves R rows
const WG: u32 = {{WG}}u;  // lanes per workgroup

var<workgroup> qt: array<vec4<f32>, C * B4>;  // [token][column] of the tile: normalised, scaled queries
var<workgroup> kt: array<vec4<f32>, C * B4>;  // normalised keys (in the state pass, decayed to the chunk's end)
var<workgroup> gram: array<f32, C * C>;  // [t][s], s <= t: q_t . k_s, then times D; [s][t], s < t: k_t . k_s,
                                         // then times beta_t D[t][s] (the solve's A, transposed)
var<workgroup> g_cum: array<f32, C>;     // G_t
var<workgroup> beta: array<f32, C>;
var<workgroup> q_inv: array<f32, C>;     // scale / |q_t|
var<workgroup> k_inv: array<f32, C>;     // 1 / |k_t|
var<workgroup> leads: u32;               // whether the workgroup's token starts its sequence in the step
var<workgroup> chunk_n: u32;             // tokens in the chunk (lane 0 counts them)

fn inv_norm(base4: u32) -> f32 {
    var sum = 0.0;
    for (var i = 0u; i < p.head_dim / 4u; i++) {
        sum += dot(qkv[base4 + i], qkv[base4 + i]);
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
    let d4 = d / 4u;
    let j0 = wg.x * WG * R + lid;  // this lane's rows: j0, j0 + WG, ... (R of them)
    let head4 = (slot * p.n_v_heads + h) * d * d4;
    if (p.first_chunk == 0u && tokens[t0].y == 0u) {
        for (var r = 0u; r < R; r++) {
            if (j0 + r * WG < d) {
                for (var i = 0u; i < d4; i++) {
                    state[head4 + (j0 + r * WG) * d4 + i] = vec4<f32>(0.0);
                }
            }
        }
    }
    let kh = h % p.n_k_heads;
    let stride4 = p.qkv_stride / 4u;
    let q_col4 = kh * d4;
    let k_col4 = (p.n_k_heads + kh) * d4;
    let v_col = 2u * p.n_k_heads * d + h * d;
    var sk: array<f32, R * C>;  // [row][token]: S k_t of the chunk's start state, then r_t, then u_t
    var sq: array<f32, R * C>;  // S q_t
    var sv: array<vec4<f32>, R * B4>;  // the tile's columns of this lane's state rows (pass 2: their new values)
    var c0 = t0 + p.first_chunk * C;
    for (var w = 0u; w < p.n_chunks; w++) {
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
        for (var c = lid; c < n; c += WG) {
            let t = c0 + c;
            g_cum[c] = gb[t * p.gb_stride + h];
            beta[c] = gb[t * p.gb_stride + p.n_v_heads + h];
            q_inv[c] = inv_norm(t * stride4 + q_col4) * p.scale;
            k_inv[c] = inv_norm(t * stride4 + k_col4);
        }
        workgroupBarrier();
        if (lid == 0u) {
            for (var c = 1u; c < n; c++) {
                g_cum[c] += g_cum[c - 1u];
            }
        }
        for (var e = lid; e < C * C; e += WG) {
            gram[e] = 0.0;
        }
        for (var c = 0u; c < R * C; c++) {
            sk[c] = 0.0;
            sq[c] = 0.0;
        }
        workgroupBarrier();

        // Pass 1: products of the chunk's q and k with each other and with the state rows.
        for (var col4 = 0u; col4 < d4; col4 += B4) {
            for (var e = lid; e < C * B4; e += WG) {
                let c = e / B4;
                let i = col4 + e % B4;
                var qv = vec4<f32>(0.0);
                var kv = vec4<f32>(0.0);
                if (c < n && i < d4) {
                    let base = (c0 + c) * stride4;
                    qv = qkv[base + q_col4 + i] * q_inv[c];
                    kv = qkv[base + k_col4 + i] * k_inv[c];
                }
                qt[e] = qv;
                kt[e] = kv;
            }
            workgroupBarrier();
            // A lane takes token t against four tokens s at once: each load of q_t and k_t serves four products.
            for (var e = lid; e < C * C / 4u; e += WG) {
                let t = e / (C / 4u);
                let s0 = (e % (C / 4u)) * 4u;
                if (s0 <= t && t < n) {
                    var qk = vec4<f32>(0.0);
                    var kk = vec4<f32>(0.0);
                    for (var i = 0u; i < B4; i++) {
                        let qv = qt[t * B4 + i];
                        let kv = kt[t * B4 + i];
                        let ks = mat4x4<f32>(kt[s0 * B4 + i], kt[(s0 + 1u) * B4 + i], kt[(s0 + 2u) * B4 + i],
                                             kt[(s0 + 3u) * B4 + i]);
                        qk += qv * ks;
                        kk += kv * ks;
                    }
                    for (var x = 0u; x < 4u && s0 + x <= t; x++) {
                        gram[t * C + s0 + x] += qk[x];
                        if (s0 + x < t) {
                            gram[(s0 + x) * C + t] += kk[x];
                        }
                    }
                }
            }
            for (var r = 0u; r < R; r++) {
                let j = j0 + r * WG;
                for (var i = 0u; i < B4; i++) {
                    sv[r * B4 + i] = select(vec4<f32>(0.0), state[head4 + min(j, d - 1u) * d4 + col4 + i],
                                            j < d && col4 + i < d4);
                }
            }
            for (var c = 0u; c < n; c++) {
                for (var i = 0u; i < B4; i++) {
                    let k = kt[c * B4 + i];
                    let q = qt[c * B4 + i];
                    for (var r = 0u; r < R; r++) {
                        sk[r * C + c] += dot(k, sv[r * B4 + i]);
                        sq[r * C + c] += dot(q, sv[r * B4 + i]);
                    }
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
        // (Rows past the head's end solve a system too, on zeros, and are never stored.)
        var acc: array<f32, R>;
        for (var t = 0u; t < n; t++) {
            let decay = exp(g_cum[t]);
            for (var r = 0u; r < R; r++) {
                let at = (c0 + t) * p.qkv_stride + v_col + min(j0 + r * WG, d - 1u);
                acc[r] = beta[t] * (qkv[at / 4u][at % 4u] - decay * sk[r * C + t]);
            }
            for (var s = 0u; s < t; s++) {
                let a = gram[s * C + t];
                for (var r = 0u; r < R; r++) {
                    acc[r] -= a * sk[r * C + s];
                }
            }
            for (var r = 0u; r < R; r++) {
                sk[r * C + t] = acc[r];
            }
        }
        for (var t = 0u; t < n; t++) {
            let decay = exp(g_cum[t]);
            for (var r = 0u; r < R; r++) {
                acc[r] = decay * sq[r * C + t];
            }
            for (var s = 0u; s <= t; s++) {
                let m = gram[t * C + s];
                for (var r = 0u; r < R; r++) {
                    acc[r] += m * sk[r * C + s];
                }
            }
            for (var r = 0u; r < R; r++) {
                if (j0 + r * WG < d) {
                    out[(c0 + t) * p.out_stride + h * d + j0 + r * WG] = acc[r];
                }
            }
        }

        // Pass 2: the state at the chunk's end.
        let g_last = g_cum[n - 1u];
        for (var col4 = 0u; col4 < d4; col4 += B4) {
            for (var e = lid; e < C * B4; e += WG) {
                let c = e / B4;
                let i = col4 + e % B4;
                var kv = vec4<f32>(0.0);
                if (c < n && i < d4) {
                    kv = qkv[(c0 + c) * stride4 + k_col4 + i] * (k_inv[c] * exp(g_last - g_cum[c]));
                }
                kt[e] = kv;
            }
            workgroupBarrier();
            let keep = exp(g_last);
            for (var r = 0u; r < R; r++) {
                let j = j0 + r * WG;
                for (var i = 0u; i < B4; i++) {
                    sv[r * B4 + i] = select(vec4<f32>(0.0), keep * state[head4 + min(j, d - 1u) * d4 + col4 + i],
                                            j < d && col4 + i < d4);
                }
            }
            for (var c = 0u; c < n; c++) {
                for (var i = 0u; i < B4; i++) {
                    let k = kt[c * B4 + i];
                    for (var r = 0u; r < R; r++) {
                        sv[r * B4 + i] += sk[r * C + c] * k;
                    }
                }
            }
            for (var r = 0u; r < R; r++) {
                let j = j0 + r * WG;
                for (var i = 0u; i < B4 && col4 + i < d4; i++) {
                    if (j < d) {
                        state[head4 + j * d4 + col4 + i] = sv[r * B4 + i];
                    }
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
