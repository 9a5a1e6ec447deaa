// The order in which kernels whose dispatch holds one row of workgroups (or invocations) per token slot of the
// recorded step take their tokens. Programs are recorded for a power-of-two bucket of token slots and a step fills
// only its first n_tokens; CPU emulators hand each of their threads one contiguous share of a dispatch's workgroups
// (lavapipe, Mesa 22.3), so taken in order, a step just past half a bucket gave one thread every real token and
// the others returned at once. In bit-reversed order a contiguous share of a 2^k-th of the slots holds every 2^k-th
// token, so real tokens spread evenly over the threads (lavapipe, two threads, Gemma 3's 33-token prefill step in
// a 64-slot bucket: its norms 94 -> 52 ms, rope_store 50 -> 37 ms, attention 114 -> 70 ms). The matmul kernels'
// lanes shape interleaves token tiles with rows instead (matmul_main_lanes.wgsl).

// The token slot `slot` of `slots` stands for.
fn step_token(slot: u32, slots: u32) -> u32 {
    if (slots < 2u || (slots & (slots - 1u)) != 0u) {
        return slot;
    }
    return reverseBits(slot) >> (32u - countTrailingZeros(slots));
}
