// The dedicated module worker that runs the model: Pyodide with the llmchat wheel, on the page's WebGPU.
//
// Messages from the page:
//   {type: "load", model, integrity, context, profile, pyodideURL, distURL}   profile: a device profile name
//   {type: "chat", id, request}      request: {messages | prompt, max_tokens, temperature, ...}
//   {type: "stop", id}               ends reply `id` after the token being computed
//   {type: "reset"}                  forgets the conversation
//   {type: "stats", id}              asks for the GPU bridge's counters
// Messages to the page:
//   {type: "status", text} {type: "progress", phase, loaded, total} {type: "warning", code, message}
//   {type: "ready", info} {type: "token", id, text, token} {type: "done", id, finish_reason, usage, timings}
//   {type: "stats", id, stats}
//   {type: "error", id?, code, message}
//
// Order of a first load: open WebGPU (no GPU, no download), then boot Pyodide while the model's first megabyte
// arrives, judge the model from its header against the adapter's limits, check the storage quota, download the
// rest into OPFS (model-store.js) and stream it into GPU buffers. Later loads find the file in OPFS.

import { isSoftwareAdapter } from "./adapter.js";
import { requestGPU } from "./gpu.js";
import { ModelError, ModelStore } from "./model-store.js";

const post = (message) => self.postMessage(message);
let pyodide = null;
let runtime = null;
let bridge = null;
let store = null;
const stops = new Set(); // ids of replies the page asked to stop
let queue = Promise.resolve(); // Python runs one call at a time: requests wait their turn here

self.onmessage = ({ data }) => {
  if (data.type === "stop") {
    stops.add(data.id);
    return;
  }
  queue = queue.then(() => handle(data)).catch((error) => report(error, data.id));
};

async function handle(message) {
  if (message.type === "load") return load(message);
  if (!runtime) throw new ModelError("not-ready", "the model is not loaded");
  if (message.type === "chat") return chat(message);
  if (message.type === "reset") return runtime.reset();
  if (message.type === "stats") return post({ type: "stats", id: message.id, stats: { ...bridge.stats } });
}

async function load({ model, integrity, context = 2048, profile = null, pyodideURL, distURL }) {
  const t0 = performance.now();
  post({ type: "status", text: "Checking WebGPU" });
  bridge = await requestGPU();
  bridge.onlost = (reason) => post({ type: "error", code: "device-lost", message: lostMessage(reason) });
  self.llmchatGPU = bridge;
  const adapter = bridge.describe();
  const software = isSoftwareAdapter(adapter);
  if (software) {
    post({ type: "warning", code: "software-adapter", message: "No hardware GPU is available to this page: " +
      "WebGPU runs on the CPU here (" + (adapter.architecture || adapter.description || "software") + "), so " +
      "the model will answer slowly, a few words per second." });
  }
  post({ type: "status", text: "Starting Python and reading the model header" });
  const progress = (p) => post({ type: "progress", ...p });
  const [py, opened] = await Promise.all([
    bootPython(pyodideURL, distURL),
    ModelStore.open(model, { integrity, onProgress: progress }),
  ]);
  pyodide = py;
  store = opened;
  runtime = pyodide.pyimport("llmchat.web.runtime");
  const phases = { boot_s: (performance.now() - t0) / 1000 }; // WebGPU, Pyodide and the first bytes
  let mark = performance.now();
  const lap = (name) => {
    phases[name] = (performance.now() - mark) / 1000;
    mark = performance.now();
  };
  const budget = gpuBudget();
  // The profile's numbers live in Python (llmchat/gpu/profiles.py): only its name crosses.
  const plan = JSON.parse(await runtime.check.callPromising(store, bridge, context, budget, profile));
  lap("check_s");
  store.loadTotal = plan.upload;  // bytes read from the file (the GPU may hold them repacked, larger)
  await store.checkQuota();
  if (!store.complete) post({ type: "status", text: "Downloading the model" });
  await store.download();
  lap("download_s");
  post({ type: "status", text: "Loading the model onto the GPU" });
  const loaded = JSON.parse(await runtime.load.callPromising(store, plan.context));
  lap("gpu_load_s");
  post({ type: "ready", info: { ...plan, ...loaded, software, fromCache: store.fromCache,
    requests: store.requests, resumes: store.resumes, sha256: store.meta?.sha256 ?? null, phases,
    gpu: { ...bridge.stats },
    load_ms: performance.now() - t0 } });
}

async function bootPython(pyodideURL, distURL) {
  const index = new URL(pyodideURL || distURL, self.location.href).href;
  const ours = new URL(distURL, self.location.href).href;
  try {
    const { loadPyodide } = await import(index + "pyodide.mjs");
    // The lock file and the wheels always come from our origin, wherever the interpreter comes from.
    const py = await loadPyodide({ indexURL: index, lockFileURL: ours + "pyodide-lock.json", packageBaseUrl: ours,
      stdout: () => {}, stderr: (text) => console.warn(text) });
    await py.loadPackage(["llmchat"], { checkIntegrity: true, messageCallback: () => {} });
    return py;
  } catch (error) {
    throw new ModelError("runtime", `could not start the Python runtime from ${index} (is web/dist built and ` +
      `served?): ${error.message}`);
  }
}

// WebGPU does not say how much memory the GPU has. navigator.deviceMemory (capped at 8 GiB) bounds what an
// integrated GPU can share on small devices; when it reports the cap, nothing is known and nothing is refused.
function gpuBudget() {
  const gib = navigator.deviceMemory;
  if (!gib || gib >= 8) return 0;
  return Math.floor(gib * 0.75 * 2 ** 30);
}

async function chat({ id, request }) {
  const emit = (json) => {
    const event = JSON.parse(json);
    if (event.finish_reason) post({ type: "done", id, ...event });
    else post({ type: "token", id, ...event });
  };
  const shouldStop = () => stops.has(id);
  try {
    await runtime.chat.callPromising(JSON.stringify(request), emit, shouldStop);
  } finally {
    stops.delete(id);
  }
}

function report(error, id) {
  let code = error.code || "error";
  let message = error.message || String(error);
  // Python errors arrive as PythonError with the traceback; the last line is the one meant for people.
  if (error.type) {
    const last = message.trim().split("\n").pop();
    message = last.replace(/^[\w.]+: /, "");
    code = PYTHON_ERRORS[error.type] || "python";
  }
  if (bridge?.lostReason) {
    code = "device-lost";
    message = lostMessage(bridge.lostReason);
  }
  post({ type: "error", id, code, message });
}

// llmchat's exception classes (core/errors.py) as the error codes pages see.
const PYTHON_ERRORS = {
  ModelTooLargeError: "too-large", UnsupportedModelError: "unsupported", GGUFError: "bad-model",
  SourceError: "network", DeviceLostError: "device-lost", ShaderError: "shader", GPUError: "gpu",
  ContextOverflowError: "context-overflow", InvalidRequestError: "invalid-request",
  ChatTemplateError: "chat-template", TokenizerError: "tokenizer", GrammarError: "grammar",
  UnsupportedSchemaError: "unsupported-schema", FieldError: "invalid-request",
};

function lostMessage(reason) {
  return `The GPU stopped working (device lost: ${String(reason).replace(/\.$/, "")}). Reload the page to start ` +
    "again.";
}
