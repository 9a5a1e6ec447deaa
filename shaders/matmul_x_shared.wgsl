// How matmul.wgsl reads a 32-element block of x (and of the norm weight g): the 8 lanes of a subgroup each load one
// vec4 of it and pass it to the others with subgroupBroadcast. On CPU emulators every storage load becomes a
// scalar loop over the SIMD lanes, so one shared load replaces eight identical ones; on lavapipe this made prefill
// matmuls 2.6x faster than every lane loading the whole block. Needs subgroups of at least 8 invocations and every
// lane of the subgroup present: matmul.wgsl keeps out-of-range lanes running on clamped rows instead of returning.
enable subgroups;

struct Lane {
    @builtin(subgroup_invocation_id) id: u32,
}

// x[base4 .. base4 + 8) (in vec4s) into xv[8 t .. 8 t + 8).
fn load_x(t: u32, base4: u32, lane: u32) {
    let v = x[base4 + (lane & 7u)];
    xv[8u * t] = subgroupBroadcast(v, 0u);
    xv[8u * t + 1u] = subgroupBroadcast(v, 1u);
    xv[8u * t + 2u] = subgroupBroadcast(v, 2u);
    xv[8u * t + 3u] = subgroupBroadcast(v, 3u);
    xv[8u * t + 4u] = subgroupBroadcast(v, 4u);
    xv[8u * t + 5u] = subgroupBroadcast(v, 5u);
    xv[8u * t + 6u] = subgroupBroadcast(v, 6u);
    xv[8u * t + 7u] = subgroupBroadcast(v, 7u);
}

// norm[base4 .. base4 + 8) into gv.
fn load_g(base4: u32, lane: u32) {
    let v = norm[base4 + (lane & 7u)];
    gv[0] = subgroupBroadcast(v, 0u);
    gv[1] = subgroupBroadcast(v, 1u);
    gv[2] = subgroupBroadcast(v, 2u);
    gv[3] = subgroupBroadcast(v, 3u);
    gv[4] = subgroupBroadcast(v, 4u);
    gv[5] = subgroupBroadcast(v, 5u);
    gv[6] = subgroupBroadcast(v, 6u);
    gv[7] = subgroupBroadcast(v, 7u);
}
