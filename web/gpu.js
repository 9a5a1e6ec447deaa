// The JS half of the browser device (core/gpu/browser.py): WebGPU objects live here in tables, Python holds ids.
//
// Per decode step Python makes one call: read(...) applies the step's queued buffer writes and program replays
// (see apply), waits for the GPU and copies a few bytes back. The dispatch list is handed over once by program();
// its bind groups are built then and reused for every step.

const STORAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
const UNIFORM = GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST;
// Weights move from the model store to the GPU in pieces of this size: memory stays flat whatever the model.
const UPLOAD_CHUNK = 8 << 20;
const RELEASE = 0xffffffff; // in apply's meta: a buffer released (core/gpu/browser.py RELEASE)

// The adapter limits a model needs raised above WebGPU's defaults (we ask for whatever the adapter offers).
const LIMITS = [
  "maxStorageBufferBindingSize", "maxBufferSize", "maxStorageBuffersPerShaderStage",
  "maxComputeWorkgroupStorageSize", "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX",
  "maxComputeWorkgroupsPerDimension",
];
const OPTIONAL_FEATURES = ["shader-f16", "subgroups"];

// Open the page's WebGPU adapter and device, or throw an Error whose `code` says why not (for the page to show).
export async function requestGPU() {
  if (!("gpu" in navigator) || !navigator.gpu) {
    throw Object.assign(new Error("This browser has no WebGPU (navigator.gpu is missing), so the model cannot " +
      "run on this device. Try a recent Chrome, Edge or Safari, or enable WebGPU."), { code: "no-webgpu" });
  }
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) {
    throw Object.assign(new Error("WebGPU is present but no GPU adapter is available (it may be disabled or " +
      "blocklisted for this GPU)."), { code: "no-adapter" });
  }
  const requiredLimits = {};
  for (const name of LIMITS) requiredLimits[name] = adapter.limits[name];
  const requiredFeatures = OPTIONAL_FEATURES.filter((f) => adapter.features.has(f));
  const device = await adapter.requestDevice({ requiredLimits, requiredFeatures, label: "llmchat" });
  return new GPUBridge(adapter, device);
}

// [name, WGSL text, binding kinds, pipeline constants]: one kernel, as GPUBridge.kernel takes it.
const isSpec = (spec) => Array.isArray(spec) && spec.length === 4 && typeof spec[0] === "string" &&
  typeof spec[1] === "string" && Array.isArray(spec[2]) && spec[2].every((k) => typeof k === "string") &&
  spec[3] !== null && typeof spec[3] === "object" && !Array.isArray(spec[3]) &&
  Object.values(spec[3]).every((v) => typeof v === "number" || typeof v === "boolean");

export class GPUBridge {
  constructor(adapter, device) {
    this.adapter = adapter;
    this.device = device;
    this.queue = device.queue;
    this.buffers = [null]; // id 0 is never used, so a zero id is always a mistake
    this.kernels = [null];
    this.programs = [null];
    this.lostReason = null; // null while the device is alive; the browser's message afterwards
    // Where load time goes: pipeline compilation (wall time of each parallel batch, summed) and weight upload.
    // prepared: kernels created from a list saved by an earlier load before Python asked (see prepare);
    // prepared_used: Python's requests that one of them served.
    // buffer_bytes: the bytes of the buffers alive now, buffer_peak the most at any time; once: one-off dispatch
    // lists run (runOnce).
    this.stats = { kernels: 0, compile_ms: 0, uploads: 0, upload_bytes: 0, upload_ms: 0, programs: 0, once: 0,
      replays: 0, replay_ms: 0, requested: 0, prepared: 0, prepared_used: 0, buffer_bytes: 0, buffer_peak: 0 };
    this.kernelIds = new Map(); // JSON of [name, code, kinds, constants] → kernel id: the same WGSL compiles once
    this.preparing = new Map(); // key → spec: prepared kernels not started yet, in order (see prepare)
    this.asked = []; // the specs Python asked for, in order, once each: what a later load may prepare
    this.checks = []; // pending error scopes (see #check)
    this.uploads = Promise.resolve(); // weight uploads and the work queued behind them, in order (see writeFrom)
    this.uploading = 0; // how many of those have not finished
    this.compiling = 0; // pipelines being compiled right now
    this.compileStart = 0;
    this.onlost = null;
    device.lost.then((info) => {
      this.lostReason = info.message || info.reason || "unknown reason";
      if (this.onlost) this.onlost(this.lostReason);
    });
  }

  // What Python needs to know about the adapter (core/gpu/browser.py adapter_info).
  describe() {
    const info = this.adapter.info || {};
    const limits = {};
    for (const name of [...LIMITS, "maxStorageBufferBindingSize"]) limits[name] = this.device.limits[name];
    return {
      vendor: info.vendor || "", architecture: info.architecture || "", device: info.device || "",
      description: info.description || "", isFallbackAdapter: Boolean(info.isFallbackAdapter),
      subgroupMinSize: info.subgroupMinSize || 0, subgroupMaxSize: info.subgroupMaxSize || 0,
      features: [...this.device.features], limits,
      packed4x8: Boolean(navigator.gpu.wgslLanguageFeatures?.has("packed_4x8_integer_dot_product")),
    };
  }

  // A buffer's id at once; the GPU memory when something first uses it. A load's work runs in order behind the
  // weight uploads (writeFrom), while Python goes on without waiting for it: each weight's rows in the file's
  // layout then exist only from their upload to their release after the repack, one weight at a time, however
  // far ahead Python has recorded.
  createBuffer(size, label, uniform) {
    this.#alive();
    return this.buffers.push({ size, label, usage: uniform ? UNIFORM : STORAGE }) - 1;
  }

  #buffer(id) {
    const entry = this.buffers[id];
    if (entry instanceof GPUBuffer) return entry;
    const { size, label, usage } = entry;
    this.device.pushErrorScope("out-of-memory");
    const buffer = this.buffers[id] = this.device.createBuffer({ size, label, usage });
    this.stats.buffer_bytes += size;
    this.stats.buffer_peak = Math.max(this.stats.buffer_peak, this.stats.buffer_bytes);
    this.#check(this.device.popErrorScope(), "OutOfMemory",
      `the GPU ran out of memory allocating '${label}' (${size} bytes); try a smaller model or context-size`);
    return buffer;
  }

  // Work Python queued since its last call, in order: `meta` holds four integers per item, either a buffer write
  // (buffer, offset, start, length: bytes [start, start + length) of `blob`) or, with buffer id 0, a replay of
  // program `offset`, or (0, RELEASE, buffer) the end of that buffer (core/gpu/browser.py release). A decode step
  // therefore reaches JS once, with the read that ends it.
  apply(blob, meta) {
    if (!meta) return;
    if (this.uploading) return this.#afterUploads(() => this.#apply(blob, meta)); // keep Python's order
    this.#apply(blob, meta);
  }

  #apply(blob, meta) {
    for (let i = 0; i < meta.length; i += 4) {
      if (meta[i] === 0 && meta[i + 1] === RELEASE) this.#release(meta[i + 2]);
      else if (meta[i] === 0) this.#replay(meta[i + 1]);
      else this.queue.writeBuffer(this.#buffer(meta[i]), meta[i + 1], blob, meta[i + 2], meta[i + 3]);
    }
  }

  // Queue a copy of `length` bytes at `srcOffset` of a model store file into buffer `id` at `offset`, chunk by
  // chunk, and return at once: the weights stream in while Python records the model's programs and their
  // pipelines compile (both wait on the browser, not on each other). Work applied later waits behind the copies,
  // so the GPU sees writes and replays in the order Python made them; read() and settled() wait for them all and
  // report the first failure, after which the queued copies are dropped.
  writeFrom(id, offset, store, srcOffset, length) {
    this.#alive();
    this.#afterUploads(async () => {
      this.#alive();
      const t0 = performance.now();
      const buffer = this.#buffer(id);
      for (let done = 0; done < length; done += UPLOAD_CHUNK) {
        const n = Math.min(UPLOAD_CHUNK, length - done);
        const bytes = await store.read(srcOffset + done, n);
        this.queue.writeBuffer(buffer, offset + done, bytes, 0, (n + 3) & ~3);
        store.uploaded(n);
      }
      this.stats.uploads++;
      this.stats.upload_bytes += length;
      this.stats.upload_ms += performance.now() - t0;
    });
  }

  #afterUploads(task) {
    this.uploading++;
    this.uploads = this.uploads.then(task).finally(() => this.uploading--);
    this.uploads.catch(() => {}); // reported by the next read() or settled(), not as an unhandled rejection
  }

  // Every queued upload done (the worker's load ends here, so "ready" means the weights are on the GPU).
  async settled() {
    await this.uploads;
    await this.#settle();
  }

  // Start compiling WGSL into a pipeline with an explicit layout (binding kinds from the shader text, see
  // kernels.py) and return its id at once: pipelines compile in parallel, and program() waits for the ones it uses.
  // A kernel already made with the same text, kinds and constants (by prepare, usually) is reused.
  kernel(name, code, kinds, constants) {
    this.#alive();
    this.stats.requested++;
    const spec = [name, code, [...kinds], { ...constants }];
    const key = JSON.stringify(spec);
    // A request the prepared list does not hold means the list is stale (another llmchat, other variants): its
    // kernels not started yet would only queue ahead of the ones asked for (SwiftShader compiles one at a time).
    if (this.kernelIds.has(key) || this.preparing.has(key)) this.#prepareRest();
    else this.preparing.clear();
    let id = this.kernelIds.get(key);
    if (id === undefined) id = this.#create(key, spec);
    const kernel = this.kernels[id];
    if (!kernel.asked) {
      kernel.asked = true;
      this.asked.push(spec);
    }
    if (kernel.prepared) this.stats.prepared_used++;
    return id;
  }

  // Compile the kernels a previous load asked for (specs as `asked` holds them) before Python asks again: the WGSL
  // a model needs on an adapter does not change between loads, so its pipelines can compile while Python starts.
  // One at a time until Python asks for its first kernel, then all the rest at once (or none, if Python asks for
  // one the list does not hold): where the GPU is emulated on the CPU (SwiftShader), a burst of compiles would take
  // every core from Python's start and gain nothing. The list comes from storage and may be anything: a spec that
  // is not one is skipped, and a kernel that fails to compile says so only if Python asks for it (its program
  // reports the error, as always). Returns how many.
  prepare(specs) {
    if (!Array.isArray(specs)) return 0;
    const before = this.preparing.size;
    for (const spec of specs) {
      if (!isSpec(spec)) continue;
      const key = JSON.stringify(spec);
      if (!this.kernelIds.has(key)) this.preparing.set(key, spec);
    }
    const added = this.preparing.size - before;
    if (!before) this.#prepareNext();
    return added;
  }

  #prepareNext() {
    const [first] = this.preparing;
    if (!first || this.lostReason !== null) return;
    const kernel = this.#prepareOne(...first);
    if (kernel) kernel.ready.catch(() => {}).finally(() => this.#prepareNext());
    else this.#prepareNext();
  }

  #prepareRest() {
    for (const entry of [...this.preparing]) this.#prepareOne(...entry);
  }

  #prepareOne(key, spec) {
    this.preparing.delete(key);
    if (this.kernelIds.has(key) || this.lostReason !== null) return null;
    this.device.pushErrorScope("validation"); // a damaged layout must not reach the console as uncaptured
    let kernel = null;
    try {
      kernel = this.kernels[this.#create(key, spec)];
      kernel.prepared = true;
      this.stats.prepared++;
    } catch {
      // a value WebGPU refuses outright (a binding kind it does not know): skipped
    }
    this.device.popErrorScope().catch(() => {});
    return kernel;
  }

  #create(key, [name, code, kinds, constants]) {
    const t0 = performance.now();
    const module = this.device.createShaderModule({ code, label: name });
    const layout = this.device.createBindGroupLayout({
      label: name,
      entries: kinds.map((type, binding) => ({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type } })),
    });
    const kernel = { name, layout, pipeline: null, prepared: false, asked: false };
    kernel.ready = this.device.createComputePipelineAsync({
      label: name,
      layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout], label: name }),
      compute: { module, entryPoint: "main", constants },
    }).then((pipeline) => {
      kernel.pipeline = pipeline;
      this.stats.kernels++;
    }, async (error) => {
      const info = await module.getCompilationInfo();
      const messages = info.messages.map((m) => `${m.type} at ${m.lineNum}:${m.linePos}: ${m.message}`);
      throw Object.assign(new Error([`kernel '${name}' failed to compile: ${error.message}`, ...messages]
        .join("\n")), { name: "ShaderError" });
    });
    if (this.compiling++ === 0) this.compileStart = t0;
    kernel.ready.catch(() => {}).finally(() => { // errors are reported by the program that uses the kernel
      if (--this.compiling === 0) this.stats.compile_ms += performance.now() - this.compileStart;
    });
    const id = this.kernels.push(kernel) - 1;
    this.kernelIds.set(key, id);
    return id;
  }

  // Build the bind groups of a recorded dispatch list once; see BrowserDevice.program for the flat layout.
  async program(flat, names) {
    this.#alive();
    await this.#settle();
    const { steps, scope } = await this.#bind(flat, names);
    const error = await scope;
    if (error) throw new Error(`binding buffers to the recorded kernels failed: ${error.message}`);
    this.stats.programs++;
    return this.programs.push(steps) - 1;
  }

  // Run a dispatch list once (BrowserDevice.run_once) in order with the work queued before and after it, and
  // return at once: nothing waits for it and nothing of it is kept. Its errors surface at the next program(),
  // read() or settled().
  runOnce(flat, names) {
    this.#alive();
    this.#afterUploads(async () => {
      this.#alive();
      const { steps, scope } = await this.#bind(flat, names);
      this.#check(scope, "GPUError", "binding buffers to the kernels of a one-off program failed");
      this.#submit(steps);
      this.stats.once++;
    });
  }

  // The dispatches of `flat` with their bind groups, once their kernels are ready; `scope` resolves to the error
  // binding them met, if any.
  async #bind(flat, names) {
    const used = new Set();
    for (let i = 1, d = 0; d < flat[0]; d++) {
      used.add(this.kernels[flat[i]]);
      i += 5 + 3 * flat[i + 4];
    }
    await Promise.all([...used].map((kernel) => kernel.ready));
    this.device.pushErrorScope("validation"); // pushed and popped with nothing awaited between: scopes nest
    const steps = [];
    let i = 1;
    for (let d = 0; d < flat[0]; d++) {
      const kernel = this.kernels[flat[i]];
      const grid = [flat[i + 1], flat[i + 2], flat[i + 3]];
      const entries = [];
      const count = flat[i + 4];
      i += 5;
      for (let b = 0; b < count; b++, i += 3) {
        const buffer = this.#buffer(flat[i]);
        entries.push({ binding: b, resource: { buffer, offset: flat[i + 1], size: flat[i + 2] } });
      }
      const group = this.device.createBindGroup({ layout: kernel.layout, entries, label: names[d] });
      steps.push({ pipeline: kernel.pipeline, group, grid });
    }
    return { steps, scope: this.device.popErrorScope() };
  }

  // WebGPU frees the memory once the work submitted before is done.
  #release(id) {
    const buffer = this.buffers[id];
    if (buffer instanceof GPUBuffer) {
      this.stats.buffer_bytes -= buffer.size;
      buffer.destroy();
    }
    this.buffers[id] = null;
  }

  // Encode and submit every dispatch of a recorded program.
  #replay(id) {
    this.#alive();
    const t0 = performance.now();
    this.#submit(this.programs[id]);
    this.stats.replays++;
    this.stats.replay_ms += performance.now() - t0;
  }

  #submit(steps) {
    this.device.pushErrorScope("validation");
    const encoder = this.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    let last = null;
    for (const { pipeline, group, grid } of steps) {
      if (pipeline !== last) {
        pass.setPipeline(pipeline);
        last = pipeline;
      }
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(grid[0], grid[1], grid[2]);
    }
    pass.end();
    this.queue.submit([encoder.finish()]);
    this.#check(this.device.popErrorScope(), "GPUError", "running a recorded program failed");
  }

  // Apply the queued work, wait for it, and copy `size` bytes of buffer `id` back.
  async read(id, offset, size, blob, meta) {
    this.#alive();
    this.apply(blob, meta);
    await this.settled(); // an error in the work being read means the bytes would be garbage
    const staging = this.device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = this.device.createCommandEncoder();
    encoder.copyBufferToBuffer(this.#buffer(id), offset, staging, 0, size);
    this.queue.submit([encoder.finish()]);
    try {
      await staging.mapAsync(GPUMapMode.READ);
    } catch (error) {
      this.#alive();
      throw error;
    }
    const bytes = new Uint8Array(staging.getMappedRange().slice(0));
    staging.destroy();
    return bytes;
  }

  destroy() {
    for (const buffer of this.buffers) if (buffer instanceof GPUBuffer) buffer.destroy();
    this.buffers = [null];
    this.device.destroy();
  }

  // WebGPU reports errors asynchronously; checks pile up here and the next program() or read() settles them, so
  // a failure surfaces, with what was being done, at the next point where Python waits anyway.
  #check(scope, name, what) {
    this.checks.push(scope.then((error) => error && Object.assign(new Error(`${what}: ${error.message}`), { name })));
  }

  async #settle() {
    const errors = (await Promise.all(this.checks.splice(0))).filter(Boolean);
    if (errors.length) throw errors[0];
  }

  #alive() {
    if (this.lostReason !== null) throw new Error(`GPU device lost: ${this.lostReason}`);
  }
}
