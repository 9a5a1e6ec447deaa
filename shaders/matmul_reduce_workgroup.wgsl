// Sums each of RED_N values across the WG invocations of a workgroup (matmul_main_rowgroup.wgsl) with a tree in
// workgroup memory: log2(WG) barriers. Portable: no subgroups needed. Invocation 0 ends with the sums.

struct Coop {
    @builtin(local_invocation_id) local: vec3<u32>,
}

var<workgroup> partial: array<f32, RED_N * WG>;  // [value][invocation]

fn reduce_tile(c: Coop) {
    let l = c.local.x;
    for (var e = 0u; e < RED_N; e++) {
        partial[e * WG + l] = red_get(e);
    }
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if (l < s) {
            for (var e = 0u; e < RED_N; e++) {
                partial[e * WG + l] += partial[e * WG + l + s];
            }
        }
    }
    workgroupBarrier();
    if (l == 0u) {
        for (var e = 0u; e < RED_N; e++) {
            red_set(e, partial[e * WG]);
        }
    }
}
