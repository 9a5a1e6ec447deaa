// Writes the subgroup size the adapter runs compute shaders with, so kernel variants that share loads across the
// lanes of a subgroup are only chosen where subgroups are wide enough (llmchat/gpu/variants.py).
enable subgroups;

@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(8)
fn main(@builtin(subgroup_size) size: u32, @builtin(local_invocation_index) i: u32) {
    if (i == 0u) {
        out[0] = size;
    }
}
