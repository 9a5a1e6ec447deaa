// The adapter's streaming bandwidth, for the roofline report (llmchat.runtime.roofline): invocations read the
// source in 16-byte words in one of two orders, and the report keeps the faster:
// CHUNKED false: a grid-stride loop, neighbouring invocations reading neighbouring words (the coalesced order
//   GPUs reward);
// CHUNKED true: each invocation reads one contiguous run of words (what CPU emulators, where an invocation is a
//   SIMD lane and every load a loop over the lanes, stream fastest).
// COPY false: each invocation folds what it read into one word, stored so the loads cannot be optimised away.
// COPY true: every word read is written to the same place in `dst`.

struct Params {
    words: u32,  // vec4<u32> words in src (and in dst when copying)
    invocations: u32,  // invocations that read (the grid may have a few more)
    per: u32,  // words per invocation when CHUNKED
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

const WG: u32 = {{WG}}u;
const COPY: bool = {{COPY}};
const CHUNKED: bool = {{CHUNKED}};

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let id = gid.x + gid.y * groups.x * WG;
    if (id >= p.invocations) {
        return;
    }
    var first = id;
    var end = p.words;
    var step = p.invocations;
    if (CHUNKED) {
        first = id * p.per;
        end = min(p.words, first + p.per);
        step = 1u;
    }
    var acc = vec4<u32>(0u);
    for (var i = first; i < end; i += step) {
        let v = src[i];
        if (COPY) {
            dst[i] = v;
        } else {
            acc ^= v;
        }
    }
    if (!COPY) {
        dst[id] = acc;
    }
}
