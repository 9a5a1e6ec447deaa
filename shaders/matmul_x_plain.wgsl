// How matmul.wgsl reads a 32-element block of x (and of the norm weight g): every invocation loads all of it
// itself. Portable (no subgroups); on GPUs neighbouring invocations read the same addresses, which caches serve.

struct Lane {
    @builtin(local_invocation_index) id: u32,  // unused here; keeps main's signature the same in both variants
}

// x[base4 .. base4 + 8) (in vec4s) into xv[8 t .. 8 t + 8).
fn load_x(t: u32, base4: u32, lane: u32) {
    let o = 8u * t;
    xv[o] = x[base4];
    xv[o + 1u] = x[base4 + 1u];
    xv[o + 2u] = x[base4 + 2u];
    xv[o + 3u] = x[base4 + 3u];
    xv[o + 4u] = x[base4 + 4u];
    xv[o + 5u] = x[base4 + 5u];
    xv[o + 6u] = x[base4 + 6u];
    xv[o + 7u] = x[base4 + 7u];
}

// norm[base4 .. base4 + 8) into gv.
fn load_g(base4: u32, lane: u32) {
    gv[0] = norm[base4];
    gv[1] = norm[base4 + 1u];
    gv[2] = norm[base4 + 2u];
    gv[3] = norm[base4 + 3u];
    gv[4] = norm[base4 + 4u];
    gv[5] = norm[base4 + 5u];
    gv[6] = norm[base4 + 6u];
    gv[7] = norm[base4 + 7u];
}
