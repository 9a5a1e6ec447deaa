// Whether a WebGPU adapter is a CPU emulation (correct but slow, and the user deserves to be told). The page decides
// this before Python starts, so the names live here too; core/gpu/device.py SOFTWARE_ADAPTERS is the same list and
// a test keeps the two equal.

export const SOFTWARE_ADAPTERS = ["swiftshader", "llvmpipe", "lavapipe", "warp", "softpipe", "basic render"];

// `info`: a GPUAdapterInfo, or the bridge's description of one.
export function isSoftwareAdapter(info) {
  const text = `${info.vendor} ${info.architecture} ${info.device} ${info.description}`.toLowerCase();
  return Boolean(info.isFallbackAdapter) || SOFTWARE_ADAPTERS.some((name) => text.includes(name));
}
