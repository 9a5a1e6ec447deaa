// matmul.wgsl's entry point for SHAPE lanes: every invocation computes its own tile of R rows x TT tokens over the
// whole row, so nothing is shared and nothing is reduced. Invocation gid.x holds rows gid.x * R ..; with shared x
// loads (matmul_x_shared.wgsl) out-of-range invocations keep running on clamped rows, so every lane of a subgroup
// takes part in the broadcasts.

const ROW_STEP: u32 = 1u;
const TOK_STEP: u32 = 1u;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, lane: Lane) {
    r0 = gid.x * R;
    t0 = gid.y * TT;
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
