// The page-side JS API, shaped like OpenAI's client:
//
//   import { createEngine } from "./llm-chat.js";
//   const engine = await createEngine({ model: "https://example.org/models/x.gguf" });
//   for await (const chunk of await engine.chat.completions.create({ messages, stream: true })) {
//     out.textContent += chunk.choices[0].delta.content ?? "";
//   }
//
// A request's `prompt_cache_key` keeps that conversation's KV cache in OPFS, so a later visit reads it back instead
// of computing it again (worker.js, runtime.py; `forgetConversation(key)` deletes it).
//
// On-device, the model runs in a worker (worker.js) that every tab of this origin asking for the same model shares
// (engine-link.js; `shared: false` gives the page one of its own; `engine.info.sharing` says which). With
// `endpoint` (an OpenAI-compatible /v1 URL) the same calls go to that server instead: always with mode "remote",
// and in mode "auto" when this device has no WebGPU or only a software adapter. Without WebGPU and without an
// endpoint, createEngine rejects with a clear message (error.code "no-webgpu") before anything is downloaded.
//
// Streams end with a chunk whose finish_reason says why: "stop", "length", "tool_calls", or "abort" when the caller
// stopped the reply (stream.controller.abort(), or the request's `signal`), on the device and from a server alike.
// On the device a stream's chunks also say how far the prompt has been read: `llmchat.prefill` {done, total}.
// A request that leaves out `temperature` or `max_tokens` gets web/request-defaults.js's, wherever it runs.

import { MSG } from "./messages.js";
import { isSoftwareAdapter } from "./adapter.js";
import { connect } from "./engine-link.js";
import { resolveModelURL } from "./hub.js";
import { withDefaults } from "./request-defaults.js";

// Managing the models this site stored (list, check, delete, space left): plain OPFS calls, no engine needed.
export { deleteConversations, deleteModel, hasModel, listModels, storageEstimate } from "./stored-models.js";

const here = (path) => new URL(path, import.meta.url).href;

export class EngineError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

// How this device can run a model: "gpu", "software" (a CPU emulation of WebGPU) or "none", with the reason.
export async function probeWebGPU() {
  if (!globalThis.navigator?.gpu) return { kind: "none", reason: "This browser has no WebGPU." };
  try {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return { kind: "none", reason: "WebGPU is present but offers no GPU adapter." };
    const info = adapter.info || {};
    const software = isSoftwareAdapter(info);
    return { kind: software ? "software" : "gpu", info };
  } catch (error) {
    return { kind: "none", reason: `WebGPU failed: ${error.message}` };
  }
}

// The file URL of `model`. A short hub reference (ORG/REPO:QUANT) needs the repository's file list; the answer is
// remembered, so that a later visit without the network still finds the model it downloaded.
async function modelURL(model, endpoint) {
  const key = `llmchat-hub:${endpoint || ""}:${model}`;
  const memory = globalThis.localStorage;
  try {
    const url = await resolveModelURL(model, { endpoint });
    if (url !== model) memory?.setItem(key, url);
    return url;
  } catch (error) {
    const known = error.code === "network" ? memory?.getItem(key) : null;
    if (known) return known;
    throw error;
  }
}

// With `preload: true` it resolves at once and the model loads in the background (a page can start it before
// its chat shows); requests wait for `engine.ready`, which rejects if the load fails.
export async function createEngine(options = {}) {
  const engine = new Engine(options);
  if (!options.preload) await engine.ready;
  return engine;
}

export class Engine extends EventTarget {
  // options: model (a URL or a Hugging Face reference), integrity, context (tokens), profile (a device profile
  // such as "phone": caps the GPU's limits and memory budget, see llmchat.gpu.profiles), endpoint, mode ("auto" |
  // "local" | "remote"), apiKey and remoteModel (for the endpoint), hubEndpoint (a Hugging Face mirror),
  // pyodideURL (a CDN folder, default: our own dist), distURL, workerURL, shared (default true: one engine for
  // every tab of this origin that asks for the same model, context and profile; false: one for this page alone),
  // tune (true/false: time kernel variants at the model's shapes on a first load and keep the fastest in OPFS;
  // default: on for hardware GPUs, off on software adapters; `info.tuning` says what was chosen), onProgress,
  // onStatus, onWarning
  constructor(options = {}) {
    super();
    this.options = options;
    this.mode = null; // "local" or "remote" once decided
    this.info = null;
    this.link = null; // to the worker (engine-link.js)
    this.nextId = 1;
    this.pending = new Map(); // request id → {message, heard, handle} until its last reply
    const self = this;
    this.chat = { completions: { create: (params) => self.#create(params, true) } };
    this.completions = { create: (params) => self.#create(params, false) };
    this.ready = this.#start();
    this.ready.catch(() => {}); // the caller sees the rejection through `ready` or createEngine
  }

  async #start() {
    await null; // events fire after the constructor returns, so whoever made the engine hears them all
    const { model, endpoint, mode = "auto" } = this.options;
    if (mode === "remote" || (!model && endpoint)) return this.#remote("the page asks for the server");
    const probe = await probeWebGPU();
    if (this.terminated) return; // replaced while waiting (the element's attributes changed): start nothing
    if (probe.kind === "none") {
      if (endpoint && mode === "auto") return this.#remote(probe.reason);
      throw this.#fail(new EngineError("no-webgpu", `${probe.reason} The model cannot run in this browser: open ` +
        "the page in a browser with WebGPU turned on (a recent Chrome, Edge or Safari) on a device with a GPU" +
        (endpoint ? "." : ", or give the page an OpenAI-compatible server to answer instead (endpoint).")));
    }
    if (probe.kind === "software" && endpoint && mode === "auto") {
      return this.#remote("this device has only a software WebGPU adapter, which would be slow");
    }
    if (!model) throw this.#fail(new EngineError("no-model", "no model URL was given"));
    let url; // a Hugging Face reference becomes its file's URL here, so the download need not wait for Python
    try {
      url = new URL(await modelURL(model, this.options.hubEndpoint), location.href).href;
    } catch (error) {
      if (this.terminated) return;
      throw this.#fail(new EngineError(error.code || "bad-model", error.message));
    }
    if (this.terminated) return;
    navigator.storage?.persist?.().catch(() => {}); // keep the model when the browser needs space (best effort)
    this.mode = "local";
    const integrity = this.options.integrity || null;
    const context = this.options.context || null; // null: Python's default (llmchat.runtime.memory.context_size)
    const profile = this.options.profile || null;
    this.loadMessage = { type: MSG.load, model: url, integrity, context, profile, tune: this.options.tune ?? null,
      pyodideURL: this.options.pyodideURL,
      distURL: this.options.distURL || here("./dist/pyodide/") };
    return new Promise((resolve, reject) => {
      this.loaded = { resolve, reject };
      // Tabs asking for another model, context or profile get an engine of their own (shared with their like).
      this.link = connect({ workerURL: this.options.workerURL || here("./worker.js"), shared: this.options.shared,
        key: JSON.stringify([url, context, profile, integrity]),
        onMessage: (data) => this.#onMessage(data), onLeader: () => this.#rejoin() });
      this.link.post(this.loadMessage);
    });
  }

  // The tab that ran the shared engine closed and another took it over: join it, and send again what got no answer
  // (under new ids: a stray answer from before cannot be taken for theirs). A reply cut halfway ends with an error.
  #rejoin() {
    this.link.post(this.loadMessage);
    for (const [id, entry] of [...this.pending]) {
      this.pending.delete(id);
      if (entry.heard) {
        entry.handle({ type: MSG.error, id, code: "handover", message: "The tab that ran the model closed while " +
          "this reply was being written; another tab runs it now. Send the message again." });
        continue;
      }
      entry.message = { ...entry.message, id: this.nextId++ };
      this.pending.set(entry.message.id, entry);
      this.link.post(entry.message);
    }
  }

  // Send `message` with a fresh id; `onReply(data)` hears each answer and returns true at the last one.
  #request(message, onReply) {
    const entry = { message: { ...message, id: this.nextId++ }, heard: false };
    entry.handle = (data) => {
      entry.heard = true;
      if (onReply(data)) this.pending.delete(entry.message.id);
    };
    this.pending.set(entry.message.id, entry);
    this.link.post(entry.message);
    return entry;
  }

  #remote(reason) {
    const { endpoint } = this.options;
    if (!endpoint) throw this.#fail(new EngineError("no-endpoint", "mode is remote but no endpoint was given"));
    this.mode = "remote";
    this.info = { remote: true, endpoint, host: new URL(endpoint, globalThis.location?.href).host, reason };
    this.#emit("ready", this.info);
  }

  #onMessage(data) {
    // After the first load, a takeover's load is quiet: the page keeps its chat, and hears one "handover".
    const loading = !this.info;
    switch (data.type) {
      case MSG.status: if (loading) { this.#emit("status", data); this.options.onStatus?.(data); } break;
      case MSG.warning: if (loading) { this.#emit("warning", data); this.options.onWarning?.(data); } break;
      case MSG.progress: if (loading) { this.#emit("progress", data); this.options.onProgress?.(data); } break;
      case MSG.ready:
        this.info = { ...data.info, sharing: this.link.sharing, sharingReason: this.link.reason,
          leader: this.link.leader };
        this.#emit(loading ? "ready" : "handover", this.info);
        this.loaded.resolve();
        break;
      case MSG.chunk: case MSG.done: case MSG.stats: case MSG.sweep: case MSG.forget:
        this.pending.get(data.id)?.handle(data);
        break;
      case MSG.error: {
        const error = new EngineError(data.code, data.message);
        const entry = data.id !== undefined && this.pending.get(data.id);
        if (entry) entry.handle(data);
        else {
          this.#fail(error);
          this.loaded.reject(error);
          for (const e of [...this.pending.values()]) e.handle(data); // device lost: every open reply ends with it
        }
        break;
      }
    }
  }

  #fail(error) {
    this.#emit("error", { code: error.code, message: error.message });
    return error;
  }

  #emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  // How this page reaches its engine, known before the model is in: "leader-tab" (shared by the tabs of this site)
  // or "private", and why; null in remote mode. engine.info repeats them once the model is loaded.
  get sharing() {
    return this.link?.sharing ?? null;
  }

  get sharingReason() {
    return this.link?.reason ?? null;
  }

  // The GPU bridge's counters (pipelines, uploads, replays and their milliseconds); null in remote mode.
  async gpuStats() {
    return this.#ask({ type: MSG.stats });
  }

  // Every kernel variant the tuner chooses among, timed `rounds` times at this model's shapes, beside the one
  // running (LLM.sweep_kernels: per case the microseconds per dispatch of each, the fastest, the running one);
  // null in remote mode. Slow on CPU-emulated adapters: seconds per variant.
  async sweepKernels(rounds = 8) {
    return this.#ask({ type: MSG.sweep, rounds });
  }

  // One request to the worker whose answer (a message of the same type) carries its result under that type's name.
  async #ask(message) {
    await this.ready;
    if (!this.link) return null;
    return new Promise((resolve) => this.#request(message, (data) => (resolve(data[message.type]), true)));
  }

  // Delete the conversation kept in this site's storage under `key` (requests' prompt_cache_key, below): "deleted",
  // "none" (nothing was kept) or why not; null in remote mode.
  async forgetConversation(key) {
    return this.#ask({ type: MSG.forget, key });
  }

  // Forget the conversation kept on the device (the next request starts a fresh KV cache).
  reset() {
    this.link?.post({ type: MSG.reset });
  }

  // Ends this page's use of the engine; a shared engine this tab ran moves to another tab that uses it.
  terminate() {
    this.terminated = true;
    this.link?.close();
    this.link = null;
  }

  async #create(asked, isChat) {
    await this.ready;
    const params = withDefaults(asked); // the same defaults on the device and through an endpoint
    if (this.mode === "remote") return remoteCreate(this.options, params, isChat);
    const { signal, ...request } = params;
    const entry = this.#request({ type: MSG.chat, request }, (data) => (reply.push(data), data.type !== MSG.chunk));
    const reply = new LocalReply(() => this.link?.post({ type: MSG.stop, id: entry.message.id }));
    signal?.addEventListener("abort", () => reply.abort());
    return params.stream ? reply : reply.response();
  }
}

// One on-device reply as the worker delivers it: the OpenAI chunks Python made (runtime.py, llmchat.protocol), as an
// async iterable like the openai client's Stream, or the whole response of a request that did not stream.
class LocalReply {
  constructor(stop) {
    this.stop = stop;
    this.items = [];
    this.wake = null;
    this.ended = false;
    this.controller = { abort: () => this.abort() }; // as the openai client's Stream has
  }

  abort() {
    if (!this.ended) this.stop();
  }

  push(data) {
    this.items.push(data);
    this.wake?.();
  }

  async #next() {
    while (!this.items.length) {
      await new Promise((resolve) => { this.wake = resolve; });
      this.wake = null;
    }
    const data = this.items.shift();
    if (data.type !== MSG.chunk) this.ended = true;
    if (data.type === MSG.error) throw new EngineError(data.code, data.message);
    return data;
  }

  async *[Symbol.asyncIterator]() {
    try {
      for (let data = await this.#next(); data.type === MSG.chunk; data = await this.#next()) yield data.chunk;
    } finally {
      if (!this.ended) {
        this.ended = true;
        this.stop(); // the consumer left early (break): stop computing tokens nobody reads
      }
    }
  }

  async response() {
    return (await this.#next()).response;
  }
}

// The same call against an OpenAI-compatible server; streaming replies are parsed from server-sent events. A stream
// stopped by the caller ends, as an on-device one does, with a chunk whose finish_reason is "abort".
async function remoteCreate(options, params, isChat) {
  const url = `${options.endpoint.replace(/\/$/, "")}/${isChat ? "chat/completions" : "completions"}`;
  const { signal, ...body } = params;
  // Servers pick the model by name; without remoteModel the file name of `model` is the best guess.
  if (!body.model) body.model = options.remoteModel || options.model?.split("/").pop()?.replace(/\.gguf$/i, "") || "default";
  const headers = { "Content-Type": "application/json" };
  if (options.apiKey) headers.Authorization = `Bearer ${options.apiKey}`;
  const abort = new AbortController();
  if (signal?.aborted) abort.abort();
  signal?.addEventListener("abort", () => abort.abort());
  const host = new URL(url, globalThis.location?.href).host;
  let response;
  try {
    response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body), signal: abort.signal });
  } catch (error) {
    if (abort.signal.aborted) throw error;
    throw new EngineError("network", `The server at ${host} did not answer (${error.message}). Check that it is ` +
      "running and reachable from this page, then send the message again.");
  }
  if (!response.ok) throw remoteError(host, response.status, await response.text().catch(() => ""));
  if (!params.stream) return response.json();
  return {
    controller: abort,
    async *[Symbol.asyncIterator]() {
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      let last = null;
      let ended = false; // a finish_reason came: an abort after it cuts only what follows (usage, [DONE])
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          buffer += value;
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const event = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            for (const line of event.split("\n")) {
              if (!line.startsWith("data:")) continue;
              const data = line.slice(5).trim();
              if (data === "[DONE]") return;
              last = JSON.parse(data);
              ended ||= Boolean(last.choices?.[0]?.finish_reason);
              yield last;
            }
          }
        }
      } catch (error) {
        if (!abort.signal.aborted) throw error;
        if (ended) return;
        const choice = isChat ? { index: 0, delta: {}, logprobs: null, finish_reason: "abort" } :
          { index: 0, text: "", logprobs: null, finish_reason: "abort" };
        yield { id: last?.id ?? null, object: isChat ? "chat.completion.chunk" : "text_completion",
          created: last?.created ?? Math.floor(Date.now() / 1000), model: last?.model ?? body.model,
          choices: [choice] };
      } finally {
        // Over, or the consumer left early (break): either way a server still writing stops.
        if (!abort.signal.aborted) abort.abort();
      }
    },
  };
}

// A server's refusal, with what the visitor can do about it.
function remoteError(host, status, text) {
  let message = text.slice(0, 300);
  try { message = JSON.parse(text).error?.message || message; } catch { /* not JSON: its text */ }
  const what = status === 401 || status === 403 ? "It needs an API key, which this page does not send: ask whoever " +
      "runs the server." :
    status === 404 ? "The page asks for a model the server does not run (the page can name it: remote-model)." :
    status === 429 || status >= 500 ? "It is busy or failing: send the message again in a moment." :
    "It refused the request as it stands: edit your message, or send a shorter one.";
  return new EngineError("remote", `The server at ${host} answered HTTP ${status}: ${message.replace(/\.$/, "")}. ` +
    what);
}
