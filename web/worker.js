// The module worker that runs the model: Pyodide with the llmchat wheel, on the page's WebGPU. One worker serves
// every tab that shares its engine (engine-link.js): its own tab talks to it directly, and each other tab through
// a MessagePort the owning tab hands over ({type: "connect", port}); all of them speak the messages below.
//
// Messages from a tab:
//   {type: "load", model, integrity, context, profile, tune, pyodideURL, distURL}   profile: a device profile
//                                    name; tune: true/false turns the kernel tuner on/off (null: on for hardware
//                                    adapters); the first one loads the model, later ones (other tabs) hear
//                                    "ready" once it is in
//   {type: "chat", id, request}      request: an OpenAI body {messages | prompt, stream, max_tokens, ...}
//   {type: "stop", id}               ends reply `id` within a step (of its prompt, or a token): none after it
//   {type: "reset"}                  forgets the conversation
//   {type: "forget", id, key}        deletes the conversation kept under prompt_cache_key `key`
//   {type: "stats", id}              asks for the GPU bridge's counters
//   {type: "sweep", id, rounds}      times every kernel variant the tuner chooses among (LLM.sweep_kernels)
//   {type: "connect", port}          (from the owning tab) serve one more tab on `port`
//   {type: "bye"}                    (on a port) that tab is gone
// Messages to a tab (ids are each tab's own):
//   {type: "status", text} {type: "progress", phase, loaded, total} {type: "warning", code, message}
//   {type: "ready", info} {type: "chunk", id, chunk} {type: "done", id, response?}   chunk: an OpenAI stream
//                                    chunk, as Python shaped it (llmchat.protocol); "done" ends a reply, carrying
//                                    the whole response when the request did not stream
//   {type: "stats", id, stats} {type: "sweep", id, sweep} {type: "forget", id, forget}
//   {type: "error", id?, code, message}
//
// Order of a first load: open WebGPU (no GPU, no download), then boot Pyodide while the model's first megabyte
// arrives, check the storage quota and download the rest into OPFS (model-store.js) while Pyodide still boots,
// judge the model from its header against the adapter's limits as soon as Python is up (stopping the download if
// it cannot run), and stream it into GPU buffers. Later loads find the file in OPFS, and start compiling the
// kernels the previous load asked for as soon as WebGPU is open (KERNELS_FILE).

import { MSG } from "./messages.js";
import { isSoftwareAdapter } from "./adapter.js";
import { requestGPU } from "./gpu.js";
import { ModelError, ModelStore, checkQuota, sha256Hex, storageName } from "./model-store.js";
import { chatsDir } from "./stored-models.js";
import { shardNumber } from "./shards.js";
import { SERVED_SNAPSHOT, SNAPSHOT_FILE, bootAndSnapshot, installWheels, requiredWheels, restoreSnapshot, snapshotTag }
  from "./python.js";

let pyodide = null;
let runtime = null;
let bridge = null;
let store = null;
let queue = Promise.resolve(); // Python runs one call at a time: requests of every tab wait their turn here
let loading = null; // the one load, as a Promise of the ready info
let loadedWith = null; // the options it was asked with, to refuse a tab that asks for another model
const listeners = new Set(); // tabs waiting for the load: they hear its status, progress and warnings
const clients = new Set(); // every tab served
const engineId = crypto.randomUUID(); // tabs sharing this engine see the same id in `info.engine`

const post = (message) => { for (const client of listeners) client.port.postMessage(message); };
const broadcast = (message) => { for (const client of clients) client.port.postMessage(message); };

function serve(port) {
  const client = { port, stops: new Set() }; // stops: ids of replies this tab asked to stop
  clients.add(client);
  port.onmessage = ({ data }) => {
    if (data.type === MSG.stop) client.stops.add(data.id);
    else if (data.type === MSG.connect) serve(data.port);
    else if (data.type === MSG.bye) {
      clients.delete(client);
      listeners.delete(client);
      port.close();
    } else if (data.type === MSG.load) join(data, client);
    else queue = queue.then(() => handle(data, client)).catch((error) => report(error, data.id, client));
  };
}

serve(self);

// The first tab's load runs; a later one waits for it (hearing its progress) and gets the same info.
function join(message, client) {
  // context null: the default, which Python decides (llmchat.runtime.memory.context_size)
  const asked = { model: message.model, context: message.context || null, profile: message.profile || null };
  if (loadedWith && JSON.stringify(asked) !== JSON.stringify(loadedWith)) {
    return report(new ModelError("engine-mismatch", `this engine runs ${loadedWith.model} (context ` +
      `${loadedWith.context || "default"}, profile ${loadedWith.profile || "none"}), not ${asked.model} (context ` +
      `${asked.context || "default"}, profile ${asked.profile || "none"})`), undefined, client);
  }
  listeners.add(client);
  if (!loading) {
    loadedWith = asked;
    loading = load(message);
    queue = queue.then(() => loading).catch(() => {}); // requests wait for the load; its failure is told below
  }
  loading.then((info) => client.port.postMessage({ type: MSG.ready, info: { ...info, clients: clients.size } }),
    (error) => report(error, undefined, client)).finally(() => listeners.delete(client));
}

async function handle(message, client) {
  if (!runtime) {
    await loading; // a failed load: its error, again
    throw new ModelError("not-ready", "the model is not loaded");
  }
  if (message.type === MSG.chat) return chat(message, client);
  if (message.type === MSG.reset) return runtime.reset();
  if (message.type === MSG.forget) {
    runtime.forget(message.key);
    const forget = await removeChat(message.key);
    return client.port.postMessage({ type: MSG.forget, id: message.id, forget });
  }
  if (message.type === MSG.stats) {
    return client.port.postMessage({ type: MSG.stats, id: message.id, stats: { ...bridge.stats } });
  }
  if (message.type === MSG.sweep) {
    const sweep = JSON.parse(await runtime.sweep.callPromising(message.rounds));
    return client.port.postMessage({ type: MSG.sweep, id: message.id, sweep });
  }
}

async function load({ model, integrity, context = null, profile = null, tune = null, pyodideURL, distURL }) {
  const t0 = performance.now();
  post({ type: MSG.status, text: "Checking WebGPU" });
  bridge = await requestGPU();
  bridge.onlost = (reason) => broadcast({ type: MSG.error, code: "device-lost", message: lostMessage(reason) });
  self.llmchatGPU = bridge;
  const adapter = bridge.describe();
  const software = isSoftwareAdapter(adapter);
  if (software) {
    post({ type: MSG.warning, code: "software-adapter", message: "No hardware GPU is available to this page: " +
      "WebGPU runs on the CPU here (" + (adapter.architecture || adapter.description || "software") + "), so " +
      "the model will answer slowly, a few words per second." });
  }
  const kernels = await prepareKernels(kernelKey(model, context, profile, adapter));
  post({ type: MSG.status, text: "Starting Python and reading the model header" });
  const progress = (p) => post({ type: MSG.progress, ...p, ...shards.totals(p.phase) });
  // Nothing that can run waits: Pyodide boots while the header arrives, and the weights download while it boots.
  // Python's plan (llmchat.runtime.memory, from the header) judges the model once Python is up; a refusal stops the
  // download (what arrived stays for a later resume, as after any interruption).
  const phases = {}; // seconds since the load began, at which each step ended (they overlap)
  const at = (name) => { phases[name] = (performance.now() - t0) / 1000; };
  at("gpu_s");
  const booting = bootPython(pyodideURL, distURL).then((started) => { at("boot_s"); return started; });
  booting.catch(() => {}); // awaited below; a failure meanwhile must not surface as unhandled
  const open = (url) => ModelStore.open(url, { integrity: shards.integrity(url, integrity), onProgress: progress });
  store = await open(model);
  shards.add(store, open);
  at("header_s");
  await store.checkQuota();
  // Only a file that starts like a GGUF model downloads early: anything else is refused by Python's parser below,
  // with its reason, after no more than its first bytes. Where a memory budget is in play (a device profile, or a
  // small device's navigator.deviceMemory) the model may be refused for its size, so the download waits for
  // Python's check: a phone never spends its data on a model it cannot run. The other shards of a split model
  // start once Python has read the first one's header and asked for them.
  const budget = gpuBudget();
  let downloading = null;
  if (store.complete || (!profile && !budget && startsLikeGGUF(store.probe))) {
    if (!store.complete) post({ type: MSG.status, text: "Downloading the model while Python starts" });
    downloading = store.download();
    downloading.catch(() => {});
  }
  let plan, python;
  try {
    ({ py: pyodide, python } = await booting);
    runtime = pyodide.pyimport("llmchat.browser.runtime");
    // The profile's numbers live in Python (llmchat/gpu/profiles.py): only its name crosses.
    // No context (null): undefined, which Python receives as None (null would arrive as pyodide's jsnull).
    plan = JSON.parse(await runtime.check.callPromising(store, bridge, context ?? undefined, budget, profile,
      shards.open));
    at("check_s");
  } catch (error) {
    store.cancel();
    await downloading?.catch(() => {});
    throw error;
  }
  const files = shards.all();
  for (const s of files) s.loadTotal = plan.upload;  // bytes read from the file (the GPU may hold them repacked)
  if (files.length > 1) await checkQuota(files);  // one file was checked before its download began
  if (files.some((s) => !s.complete)) post({ type: MSG.status, text: "Downloading the model" });
  await downloading;
  for (const s of files) await s.download();
  at("download_s");
  post({ type: MSG.status, text: "Loading the model onto the GPU" });
  const tuneFile = runtime.TUNE_FILE;
  const loaded = JSON.parse(await runtime.load.callPromising(store, plan.context, shards.open, tune,
    await readFile(tuneFile)));
  kernels.load = bridge.asked.length; // the kernels the load waited for: the next load prepares these
  runtime.prepare_prompt();
  await bridge.settled(); // the last weights may still be on their way (gpu.js writeFrom)
  at("gpu_load_s");
  if (loaded.tune_json) { // measured now: later loads time nothing, unless the write fails (this load stands)
    await writeFile(tuneFile, loaded.tune_json).catch((error) => post({ type: MSG.warning, code: "tune-not-saved",
      message: `the kernel tuner's results could not be stored (${error.message}); the next load measures again` }));
  }
  delete loaded.tune_json;
  if (python.saving) {
    python.snapshot = await python.saving; // long done: it was written while the model downloaded and loaded
    delete python.saving;
  }
  return { ...plan, ...loaded, software, fromCache: store.fromCache, python,
    requests: sum(files, "requests"), resumes: sum(files, "resumes"), files: files.length,
    sha256: files.length > 1 ? files.map((s) => s.meta?.sha256 ?? null) : store.meta?.sha256 ?? null, phases,
    kernels: { prepared: kernels.prepared, ...(kernels.refused && { refused: kernels.refused }),
      file: await saveKernels(kernels) }, gpu: { ...bridge.stats }, engine: engineId,
    load_ms: performance.now() - t0 };
}

// A file at the top of OPFS (the kernel tuner's results, the kernel list, Python's snapshot) as bytes, or null
// where there is none (or no OPFS).
async function readBytes(name) {
  try {
    const root = await navigator.storage.getDirectory();
    return new Uint8Array(await (await (await root.getFileHandle(name)).getFile()).arrayBuffer());
  } catch {
    return null;
  }
}

async function readFile(name) {
  const bytes = await readBytes(name);
  return bytes && new TextDecoder().decode(bytes);
}

async function writeFile(name, data) {
  const root = await navigator.storage.getDirectory();
  try {
    const writable = await (await root.getFileHandle(name, { create: true })).createWritable();
    await writable.write(data);
    await writable.close(); // the file changes here, whole
  } catch (error) {
    // A write that fails leaves the old file, or an empty one made for it, which would only be refused: remove that.
    const file = await root.getFileHandle(name).then((handle) => handle.getFile(), () => null);
    if (file?.size === 0) await root.removeEntry(name).catch(() => {});
    throw error;
  }
}

// The kernels each load asked the GPU bridge for, kept in OPFS: {key: [spec, ...]} (gpu.js prepare), most recent
// load last. The WGSL a model needs on an adapter is the same from one load to the next, so a later load starts
// compiling it as soon as WebGPU is open, while Python starts, instead of when Python asks. A list that no longer
// matches (a new llmchat, the tuner choosing other variants) costs a few useless compiles once and is replaced.
const KERNELS_FILE = "llmchat-kernels.json";
const KERNELS_KEPT = 4; // models x adapters x contexts: a few, so the file cannot grow without bound

// What the kernels depend on besides llmchat itself (the adapter description holds its limits and features).
const kernelKey = (model, context, profile, adapter) =>
  JSON.stringify([new URL(model, self.location.href).href, context, profile, adapter]);

// Prepare the stored list for `key`; anything unreadable is ignored (and replaced by saveKernels).
async function prepareKernels(key) {
  const state = { key, entries: {}, stored: null, prepared: 0, refused: null };
  const text = await readFile(KERNELS_FILE);
  if (text === null) return state;
  try {
    const entries = JSON.parse(text);
    if (!entries || typeof entries !== "object" || Array.isArray(entries) ||
        !Object.values(entries).every(Array.isArray)) throw new Error("not a {key: [kernel, ...]} object");
    state.entries = entries;
  } catch (error) {
    state.refused = error.message;
    return state;
  }
  state.stored = state.entries[key] ?? null;
  if (state.stored) state.prepared = bridge.prepare(state.stored);
  return state;
}

// Keep the kernels this load waited for, if they differ from what was prepared. Says "saved", "unchanged" or why
// not saved: a write that fails costs the next load its head start, not this load. The prompt step's kernels,
// asked after the load (runtime.prepare_prompt), are left to compile when the next load asks for them, as this
// one did: prepared early they compiled beside the decode step's and delayed the load's end (SwiftShader: the
// prompt step's matmul tiles are most of the compiling, ~0.9 s each).
async function saveKernels({ key, entries, stored, refused, load }) {
  const asked = bridge.asked.slice(0, load);
  if (!refused && stored && JSON.stringify(stored) === JSON.stringify(asked)) return "unchanged";
  delete entries[key]; // re-added last: the oldest entries go first
  entries[key] = asked;
  const keys = Object.keys(entries);
  for (const old of keys.slice(0, Math.max(0, keys.length - KERNELS_KEPT))) delete entries[old];
  try {
    await writeFile(KERNELS_FILE, JSON.stringify(entries));
    return "saved";
  } catch (error) {
    return `not saved: ${error.message}`;
  }
}

const GGUF_MAGIC = [0x47, 0x47, 0x55, 0x46]; // "GGUF"
const startsLikeGGUF = (bytes) => bytes?.length >= 4 && GGUF_MAGIC.every((b, i) => bytes[i] === b);

// The files of the model: one, or each shard of a split model (`name-00001-of-00003.gguf` ...). Python finds the
// shards from the first one's header (core/gguf.py) and asks for each through `open`; each is opened once, and
// downloads, resumes and verifies on its own. Progress covers them all. `integrity` may list one sha256 per shard,
// in shard order, separated by spaces.
const shards = {
  opening: new Map(), // absolute URL → Promise of its ModelStore
  opened: new Map(), // absolute URL → ModelStore, in the order Python asked for them (shard order)
  opener: null,
  add(first, opener) {
    this.opening.set(first.url, Promise.resolve(first));
    this.opened.set(first.url, first);
    this.opener = opener;
  },
  open: (url) => {
    const key = new URL(url, self.location.href).href;
    if (!shards.opening.has(key)) {
      shards.opening.set(key, shards.opener(key).then((s) => (shards.opened.set(key, s), s)));
    }
    return shards.opening.get(key);
  },
  all() {
    return [...this.opened.values()];
  },
  integrity(url, integrity) {
    const hashes = (integrity || "").trim().split(/\s+/).filter(Boolean);
    if (hashes.length < 2) return integrity;
    const shard = shardNumber(new URL(url, self.location.href).href);
    return hashes[shard ? shard[0] - 1 : 0] ?? null;
  },
  totals(phase) {
    const files = this.all();
    if (files.length < 2) return {};
    return phase === "download" ? { loaded: sum(files, "have"), total: sum(files, "size") } :
      { loaded: sum(files, "loaded"), total: files[0].loadTotal };
  },
};

const sum = (items, key) => items.reduce((n, item) => n + item[key], 0);

// Pyodide with llmchat installed and imported, restored from a memory snapshot (web/python.js) rather than booted,
// installed and imported: the one an earlier load kept in OPFS, else the one web/dist serves (made by the build for
// its own Pyodide, so a first visit restores too), else Python boots and a snapshot of it is kept for the next load.
// Pyodide refuses a snapshot made by another build of it; the tag, one made with another build of llmchat. On
// SwiftShader with 2 cores, Python was ready 1.3-1.8 s into a first visit from the served snapshot, 3.6-4.4 s booting.
// `python.start` says how it started: "snapshot" (OPFS), "served" or "boot"; `python.snapshot` whether a snapshot was
// kept in OPFS for the next load ("saved", or why not); `python.refused` why a snapshot was not used.
async function bootPython(pyodideURL, distURL) {
  const index = new URL(pyodideURL || distURL, self.location.href).href;
  const ours = new URL(distURL, self.location.href).href;
  try {
    const { loadPyodide } = await import(index + "pyodide.mjs");
    // The lock file, the wheels and the served snapshot always come from our origin, wherever the interpreter
    // comes from.
    const lock = await fetchOk(ours + "pyodide-lock.json").then((r) => r.json());
    const wheels = requiredWheels(lock);
    const files = Promise.all(wheels.map((w) => fetchVerified(ours + w.file_name, w.sha256)));
    files.catch(() => {}); // awaited below
    const tag = await snapshotTag(wheels);
    const options = { indexURL: index, lockFileContents: lock, packageBaseUrl: ours,
      stdout: () => {}, stderr: (text) => console.warn(text) };
    const python = {};
    const refused = [];
    const restore = async (start, saved) => {
      if (!saved) return null;
      if (!tag.every((b, i) => saved[i] === b)) {
        refused.push(`${start}: made with another build of llmchat`);
        return null;
      }
      try {
        const py = await restoreSnapshot(loadPyodide, options, saved.subarray(tag.length));
        installWheels(py, wheels, await files);
        python.start = start;
        return py;
      } catch (error) { // another Pyodide build, or a damaged file
        refused.push(`${start}: ${error.message.split("\n")[0]}`);
        return null;
      }
    };
    let py = await restore("snapshot", await readBytes(SNAPSHOT_FILE));
    if (!py && index !== ours) refused.push(`served: made for the Pyodide in ${ours}, not ${index}`);
    else if (!py) {
      const served = await fetchSnapshot(ours + SERVED_SNAPSHOT).catch((error) => {
        refused.push(`served: ${error.message}`);
        return null;
      });
      py = await restore("served", served);
      if (py) python.saving = saveSnapshot(served);
    }
    if (!py) {
      const booted = await bootAndSnapshot(loadPyodide, options, wheels, await files);
      py = booted.py;
      python.start = "boot";
      python.saving = saveSnapshot(new Blob(booted.parts));
    }
    if (refused.length) python.refused = refused.join("; ");
    return { py, python };
  } catch (error) {
    throw new ModelError("runtime", `could not start the Python runtime from ${index} (is web/dist built and ` +
      `served?): ${error.message}`);
  }
}

// web/dist's snapshot, uncompressed: (tag, snapshot) bytes. A build without one answers 404. A server that labels
// .gz files Content-Encoding: gzip has the browser decompress it already; the tag (hex digits) never starts like
// gzip's magic number.
async function fetchSnapshot(url) {
  const bytes = new Uint8Array(await (await fetchOk(url)).arrayBuffer());
  if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) return bytes;
  return new Uint8Array(await new Response(new Blob([bytes]).stream().pipeThrough(
    new DecompressionStream("gzip"))).arrayBuffer());
}

// Keep `bytes` (tag and snapshot) in OPFS for the next load: "saved", or why not (that load starts as this one did).
const saveSnapshot = (bytes) => writeFile(SNAPSHOT_FILE, bytes).then(() => "saved",
  (error) => `not saved: ${error.message}`);

async function fetchOk(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response;
}

// The bytes at `url`, refused unless their sha256 is the lock file's (as loadPackage's integrity check does).
async function fetchVerified(url, sha256) {
  const bytes = new Uint8Array(await (await fetchOk(url)).arrayBuffer());
  const digest = await sha256Hex(bytes);
  if (digest !== sha256) throw new Error(`${url} is not the file the lock file names (sha256 ${digest})`);
  return bytes;
}

// A task of its own: the messages already queued (a stop) are handled before it resolves. A MessageChannel's
// message, not setTimeout, whose nested calls wait 4 ms each.
function nextTask() {
  return new Promise((resolve) => {
    const { port1, port2 } = new MessageChannel();
    port1.onmessage = () => {
      port1.close();
      resolve();
    };
    port2.postMessage(null);
  });
}

// WebGPU does not say how much memory the GPU has. navigator.deviceMemory (capped at 8 GiB) bounds what an
// integrated GPU can share on small devices; when it reports the cap, nothing is known and nothing is refused.
function gpuBudget() {
  const gib = navigator.deviceMemory;
  if (!gib || gib >= 8) return 0;
  return Math.floor(gib * 0.75 * 2 ** 30);
}

async function chat({ id, request }, client) {
  const emit = (json) => {
    const event = JSON.parse(json);
    client.port.postMessage({ type: event.chunk ? MSG.chunk : MSG.done, id, ...event });
  };
  // Awaited by Python before each prompt step and each token. A prompt's steps read nothing back from the GPU, so
  // without a turn of the event loop here a stop message would wait behind the whole prompt.
  const shouldStop = async () => {
    await nextTask();
    return client.stops.has(id) || !clients.has(client); // a tab that left reads no more
  };
  const cache = request.messages && typeof request.prompt_cache_key === "string" ?
    await openChat(request.prompt_cache_key) : null;
  try {
    await runtime.chat.callPromising(JSON.stringify(request), emit, shouldStop, cache);
  } finally {
    client.stops.delete(id);
    cache?.handle?.close();
  }
}

// Conversations kept for a later visit (requests with prompt_cache_key): one file each (stored-models.js's chatsDir),
// named by the key's digest. Python restores and saves them (runtime.py's _KeptChat; the format is chat_cache.py's).

// {handle, identity, error}: the key's file opened for synchronous access (created empty when new), or why not
// (no OPFS, or another engine of this origin has it open); the identity of the model's bytes (its files' URLs,
// sizes, ETags, checksums), so that a kept cache is refused once the model file changes.
async function openChat(key) {
  const identity = JSON.stringify(shards.all().map((s) => [s.url, s.meta?.size, s.meta?.validator, s.meta?.sha256]));
  try {
    const file = await (await chatsDir(true)).getFileHandle(await storageName(key), { create: true });
    return { handle: await file.createSyncAccessHandle(), identity, error: null };
  } catch (error) {
    return { handle: null, identity, error: `${error.name}: ${error.message}` };
  }
}

// Deletes the file kept for `key`: "deleted", "none" (there was none) or why not.
async function removeChat(key) {
  try {
    const dir = await chatsDir();
    if (!dir) return "none";
    await dir.removeEntry(await storageName(key));
    return "deleted";
  } catch (error) {
    return error.name === "NotFoundError" ? "none" : `not deleted: ${error.name}: ${error.message}`;
  }
}

function report(error, id, client) {
  let code = error.code || "error";
  let message = error.message || String(error);
  // Python errors arrive as PythonError with the traceback; the last line is the one meant for people.
  if (error.type) {
    const last = message.trim().split("\n").pop();
    message = last.replace(/^[\w.]+: /, "");
    code = runtime ? runtime.error_code(error.type) : "python"; // each class says its own (core/errors.py)
  }
  if (bridge?.lostReason) {
    code = "device-lost";
    message = lostMessage(bridge.lostReason);
  }
  client.port.postMessage({ type: MSG.error, id, code, message });
}

function lostMessage(reason) {
  return `The GPU stopped working (device lost: ${String(reason).replace(/\.$/, "")}). Reload the page to start ` +
    "again.";
}
