// Sums each of RED_N values across the WG invocations of a workgroup (matmul_main_rowgroup.wgsl): subgroupAdd
// within each subgroup, then invocation 0 adds the subgroups' sums from workgroup memory (one barrier). Assumes,
// as GPUs lay out one-dimensional workgroups, that subgroup j holds invocations j * size .. (j + 1) * size - 1;
// subgroups of 4 lanes or more (SwiftShader's 4 is the narrowest seen).
enable subgroups;

struct Coop {
    @builtin(local_invocation_id) local: vec3<u32>,
    @builtin(subgroup_invocation_id) sg_lane: u32,
    @builtin(subgroup_size) sg_size: u32,
}

const SG_SLOTS: u32 = WG / 4u;  // WG >= 4
var<workgroup> partial: array<f32, RED_N * SG_SLOTS>;  // [value][subgroup]

fn reduce_tile(c: Coop) {
    let sg = c.local.x / c.sg_size;
    for (var e = 0u; e < RED_N; e++) {
        let v = subgroupAdd(red_get(e));
        if (c.sg_lane == 0u) {
            partial[e * SG_SLOTS + sg] = v;
        }
    }
    workgroupBarrier();
    if (c.local.x == 0u) {
        let n = (WG + c.sg_size - 1u) / c.sg_size;
        for (var e = 0u; e < RED_N; e++) {
            var s = 0.0;
            for (var j = 0u; j < n; j++) {
                s += partial[e * SG_SLOTS + j];
            }
            red_set(e, s);
        }
    }
}
