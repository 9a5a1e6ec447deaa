// matmul.wgsl's entry point for SHAPE lanes: every invocation computes its own tile of R rows x TT tokens over the
// whole row, so nothing is shared and nothing is reduced. With shared x loads (matmul_x_shared.wgsl) out-of-range
// invocations keep running on clamped rows, so every lane of a subgroup takes part in the broadcasts.

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_id) local: vec3<u32>, lane: Lane) {
    // Workgroups are taken with the token tile varying fastest, so every contiguous share of them that a CPU
    // emulator hands one thread holds the same mix of real and empty tiles (see token_order.wgsl); in grid order a
    // 33-token step gave one of lavapipe's two threads four of the five real tiles of its 64-token bucket.
    let order = wid.x + wid.y * groups.x;
    r0 = ((order / groups.y) * {{WG}}u + local.x) * R;
    t0 = (order % groups.y) * TT;
    lane_id = lane.id;
    if (t0 >= step.n_tokens) {
        return;  // the same for the whole workgroup, so no subgroup loses lanes
    }
    start_rows();
    for (var i = 0u; i < p.k / 32u; i++) {
        tile_block(i);
    }
    store_rows();
}
