// Model files kept in the origin private file system (OPFS), downloaded with HTTP Range requests.
//
// Why OPFS and not Cache Storage: a Cache entry is written from one Response and cannot be appended to, so a
// download cut at 80% would start over; an OPFS file grows chunk by chunk, so an interrupted download resumes
// from its last good byte, even after a reload. OPFS also reads any byte range of a 4 GB file cheaply
// (File.slice), which is what loading weights into GPU buffers needs.
//
// Layout: llmchat-models/<sha256(url)>.gguf holds the bytes, <same>.json what we know of them:
// {url, size, validator (ETag or Last-Modified), sha256, complete}. A file counts as cached only once
// `complete` is set, which happens after its size (and, when the page gave `integrity`, its sha256) matched.
//
// Until the file is complete, reads the loader makes beyond the downloaded part go to the network as Range
// requests: that is how the header is parsed and the model judged before any weights are fetched.

import { Sha256 } from "./sha256.js";

export const DIR = "llmchat-models"; // the models' folder at the top of OPFS
const PROBE = 1 << 20; // the first request also brings the start of the header
const CHUNK = 16 << 20; // one Range request per chunk while downloading: a dropped connection costs little
const FLUSH_EVERY = 32 << 20;
const STALL_MS = 30_000; // a response that sends nothing for this long is given up and asked again

export class ModelError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

// "sha256-<base64>" (Subresource Integrity), "sha256:<hex>" or bare hex → lowercase hex; null when absent.
export function integrityHex(integrity) {
  if (!integrity) return null;
  const text = integrity.trim();
  if (/^sha256-/.test(text)) {
    const raw = atob(text.slice(7));
    return Array.from(raw, (c) => c.charCodeAt(0).toString(16).padStart(2, "0")).join("");
  }
  const hex = text.replace(/^sha256:/, "").toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(hex)) throw new ModelError("integrity", `integrity "${integrity}" is not a sha256`);
  return hex;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class ModelStore {
  // options: integrity, onProgress({phase, loaded, total}), retries (consecutive failures), backoffMs, stallMs
  static async open(url, options = {}) {
    const store = new ModelStore(new URL(url, self.location.href).href, options);
    await store.#locked(() => store.#init());
    return store;
  }

  constructor(url, { integrity = null, onProgress = () => {}, retries = 6, backoffMs = 250, stallMs = STALL_MS } = {}) {
    this.url = url;
    this.expected = integrityHex(integrity);
    this.onProgress = onProgress;
    this.retries = retries;
    this.backoffMs = backoffMs;
    this.stallMs = stallMs;
    this.size = 0;
    this.have = 0; // bytes on disk, all good: writes only ever append what the server sent in order
    this.complete = false;
    this.fromCache = false;
    this.requests = 0; // HTTP requests made, retries included
    this.resumes = 0; // downloads continued from a byte other than zero
    this.loaded = 0; // bytes handed to the GPU so far (progress of the load phase)
    this.loadTotal = 0;
    this.probe = null; // bytes of the first request, kept for the header parser
  }

  // Tabs of one origin share OPFS: whatever reads or writes this model's files runs under one Web Lock per URL,
  // so a second tab waits for the first one's download and then finds the file complete instead of failing.
  async #locked(job) {
    this.key ??= await storageName(this.url);
    if (!navigator.locks) return job();
    return navigator.locks.request(`llmchat-model:${this.key}`, job);
  }

  async #init() {
    const root = await navigator.storage.getDirectory();
    this.dir = await root.getDirectoryHandle(DIR, { create: true });
    this.fileHandle = await this.dir.getFileHandle(`${this.key}.gguf`, { create: true });
    this.meta = await this.#readMeta();
    const onDisk = (await this.fileHandle.getFile()).size;
    if (this.meta?.complete && this.meta.size === onDisk &&
        (!this.expected || this.meta.sha256 === this.expected)) {
      // Cached and verified: no network at all (this is what makes the second visit work offline).
      Object.assign(this, { size: onDisk, have: onDisk, complete: true, fromCache: true });
      return;
    }
    let first;
    try {
      first = await this.#fetchRange(0, PROBE - 1);
    } catch (error) {
      // A URL that never gave a byte leaves nothing behind (an earlier visit's partial download stays for resume).
      if (onDisk === 0) await this.remove();
      throw error;
    }
    const { body, total, validator } = first;
    this.size = total;
    this.probe = body;
    const same = this.meta && this.meta.size === total && this.meta.validator === validator && !this.meta.complete;
    this.have = same ? Math.min(onDisk, total) : 0;
    this.meta = { url: this.url, size: total, validator, sha256: null, complete: false };
    if (!same) await this.#truncate(0);
    await this.#writeMeta();
  }

  // Bytes [offset, offset + length): from disk when downloaded, else from the network. While a download holds
  // the file (its sync access handle locks it), reads past the first request's bytes go to the network.
  async read(offset, length) {
    if (offset + length <= this.have && !this.downloading) {
      // A complete file no longer changes: one snapshot serves every read (a load makes hundreds).
      const file = this.complete ? (this.file ??= await this.fileHandle.getFile()) : await this.fileHandle.getFile();
      return new Uint8Array(await file.slice(offset, offset + length).arrayBuffer());
    }
    if (this.probe && offset + length <= this.probe.length) return this.probe.slice(offset, offset + length);
    return (await this.#fetchRange(offset, offset + length - 1)).body;
  }

  // Progress of moving weights into GPU memory (the GPU bridge reports each chunk).
  uploaded(n) {
    this.loaded += n;
    this.onProgress({ phase: "load", loaded: this.loaded, total: this.loadTotal });
  }

  // Refuse before downloading when the origin's storage quota cannot hold the rest of the file.
  async checkQuota() {
    return checkQuota([this]);
  }

  // Download what is missing, resuming after failures, then verify. Safe to call on a complete store.
  async download() {
    await this.#locked(async () => {
      if (!this.complete) await this.#resync();
      if (!this.complete) {
        try {
          return await this.#download();
        } catch (error) { // a full storage met anywhere else (metadata, flush) says the same as a full write
          if (error?.name === "QuotaExceededError") throw await quotaError(this.size, this.size - this.have, this.url);
          throw error;
        }
      }
      this.onProgress({ phase: "download", loaded: this.size, total: this.size, cached: true });
    });
  }

  // Another tab may have downloaded (part of) the file since #init read its state.
  async #resync() {
    const meta = await this.#readMeta();
    const onDisk = (await this.fileHandle.getFile()).size;
    if (!meta || meta.size !== this.size || meta.validator !== this.meta.validator) return;
    if (meta.complete && onDisk === this.size && (!this.expected || meta.sha256 === this.expected)) {
      Object.assign(this, { meta, have: onDisk, complete: true, fromCache: true, probe: null });
    } else {
      this.have = Math.min(onDisk, this.size);
    }
  }

  // Stop a download in progress after the piece being written (the page no longer wants this model here).
  cancel() {
    this.cancelled = true;
  }

  async #download() {
    this.downloading = true;
    try {
      return await this.#downloadLocked();
    } finally {
      this.downloading = false;
    }
  }

  async #downloadLocked() {
    const hash = this.expected ? await this.#hashPrefix() : null;
    let handle;
    try {
      handle = await this.fileHandle.createSyncAccessHandle();
    } catch (error) {
      throw new ModelError("busy", "the model is being downloaded by another tab of this site; close it or wait " +
        `for it to finish (${error.message})`);
    }
    try {
      handle.truncate(this.have);
      let failures = 0;
      let sinceFlush = 0;
      this.onProgress({ phase: "download", loaded: this.have, total: this.size });
      if (this.have > 0) this.resumes++;
      while (this.have < this.size) {
        if (this.cancelled) {
          handle.flush();
          await this.#writeMeta();
          throw new ModelError("cancelled", `the download of ${this.url} was stopped at byte ${this.have}`);
        }
        const start = this.have;
        const end = Math.min(this.size, start + CHUNK) - 1;
        try {
          await this.#streamRange(start, end, (piece) => {
            this.#write(handle, piece);
            hash?.update(piece);
            this.have += piece.length;
            sinceFlush += piece.length;
            this.onProgress({ phase: "download", loaded: this.have, total: this.size });
          });
          failures = 0;
        } catch (error) {
          if (error instanceof ModelError) {
            handle.truncate(this.have); // only whole, in-order bytes stay: the next visit resumes after them
            handle.flush();
            await this.#writeMeta().catch(() => {});
            if (error.code === "quota") throw await quotaError(this.size, this.size - this.have, this.url);
            throw error;
          }
          if (this.have > start) failures = 0; // it moved: only consecutive failures without progress count
          if (++failures > this.retries) {
            throw new ModelError("network", `the download of ${this.url} failed ${failures} times in a row at ` +
              `byte ${this.have} of ${this.size} (${error.message}); it will resume from there next time`);
          }
          handle.flush();
          // The metadata only records progress here (resuming goes by the file's size): a full storage must not
          // turn a network failure into another error.
          await this.#writeMeta().catch(() => {});
          this.resumes++;
          await sleep(Math.min(8000, this.backoffMs * 2 ** (failures - 1)));
        }
        if (sinceFlush >= FLUSH_EVERY) {
          handle.flush();
          sinceFlush = 0;
        }
      }
      handle.flush();
      if (handle.getSize() !== this.size) {
        throw new ModelError("verify", `the downloaded file has ${handle.getSize()} bytes, expected ${this.size}`);
      }
    } finally {
      handle.close();
    }
    const digest = hash?.hex() ?? null;
    if (this.expected && digest !== this.expected) {
      await this.#truncate(0);
      this.have = 0;
      await this.#writeMeta();
      throw new ModelError("integrity", `the model's sha256 is ${digest}, the page expects ${this.expected}: ` +
        "the download was discarded");
    }
    Object.assign(this.meta, { complete: true, sha256: digest });
    this.complete = true;
    this.probe = null;
    await this.#writeMeta();
  }

  #write(handle, piece) {
    try {
      const n = handle.write(piece, { at: this.have });
      if (n !== piece.length) throw new DOMException(`wrote ${n} of ${piece.length} bytes`, "QuotaExceededError");
    } catch (error) {
      const full = error.name === "QuotaExceededError";
      throw new ModelError(full ? "quota" : "storage", `${full ? "the browser's storage for this site is full" :
        `could not write the model to the browser's storage (${error.name}: ${error.message})`} at byte ` +
        `${this.have} of ${this.size} of ${this.url}; free some space (site data, other models) or use a smaller ` +
        "model, then reload: the download resumes from there");
    }
  }

  // Forget this model (bytes and metadata).
  async remove() {
    await removeFiles(this.dir, this.key);
  }

  // Re-hash what an earlier, interrupted download left on disk, so the digest covers the whole file.
  async #hashPrefix() {
    const hash = new Sha256();
    const file = await this.fileHandle.getFile();
    for (let at = 0; at < this.have; at += CHUNK) {
      hash.update(new Uint8Array(await file.slice(at, Math.min(this.have, at + CHUNK)).arrayBuffer()));
    }
    return hash;
  }

  async #fetchRange(start, end) {
    let failures = 0;
    for (;;) {
      try {
        const chunks = [];
        const info = await this.#streamRange(start, end, (piece) => chunks.push(piece));
        const body = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
        let at = 0;
        for (const c of chunks) {
          body.set(c, at);
          at += c.length;
        }
        return { body, ...info };
      } catch (error) {
        if (error instanceof ModelError) throw error;
        if (++failures > this.retries) {
          throw new ModelError("network", `could not download ${this.url} (${error.message}, ${failures} tries): ` +
            "the network may be down, or the server refuses this site (CORS) or redirects in a loop; check that " +
            "the URL downloads the file when opened in a browser tab");
        }
        await sleep(Math.min(8000, this.backoffMs * 2 ** (failures - 1)));
      }
    }
  }

  // GET bytes [start, end] and hand the body to `sink` piece by piece as it arrives.
  async #streamRange(start, end, sink) {
    this.requests++;
    // A server that stops sending (headers or body) is cut after stallMs of silence; the caller retries.
    const abort = new AbortController();
    let timer;
    const silence = () => {
      clearTimeout(timer);
      timer = setTimeout(() => abort.abort(), this.stallMs);
    };
    const stalled = (error) => abort.signal.aborted ?
      new Error(`the server sent nothing for ${this.stallMs / 1000} s`) : error;
    silence();
    try {
      let response;
      try {
        response = await fetch(this.url, { headers: { Range: `bytes=${start}-${end}` }, cache: "no-store",
          signal: abort.signal });
      } catch (error) {
        throw stalled(new Error(`request failed: ${error.message}`));
      }
      return await this.#receive(response, start, end, sink, silence, stalled);
    } finally {
      clearTimeout(timer);
    }
  }

  async #receive(response, start, end, sink, silence, stalled) {
    const type = response.headers.get("Content-Type") || "";
    if (response.ok && /^\s*text\/html\b/i.test(type)) {
      response.body?.cancel();
      throw new ModelError("not-a-model", `${this.url} answered with a web page (HTTP ${response.status}, ` +
        `Content-Type ${type}) instead of a GGUF model file: check the model URL; it must be the file's direct ` +
        "download link, not the page that shows it");
    }
    if (response.status === 200) {
      response.body?.cancel();
      throw new ModelError("range", `the server of ${this.url} ignores HTTP Range requests; llmchat needs them ` +
        "to download a model in resumable parts");
    }
    if (response.status !== 206) {
      if (response.status >= 500) throw new Error(`HTTP ${response.status}`);
      response.body?.cancel();
      const what = `${this.url} answered HTTP ${response.status}${response.statusText ? " " + response.statusText : ""}`;
      if (response.status === 404) throw new ModelError("not-found", `${what}: there is no model file at this URL; ` +
        "check the model URL (its spelling, the repository and the file name)");
      throw new ModelError("http", `${what}: check the model URL and that the server lets this site download it`);
    }
    const range = /bytes (\d+)-(\d+)\/(\d+)/.exec(response.headers.get("Content-Range") || "");
    if (!range || Number(range[1]) !== start) {
      throw new ModelError("range", `${this.url}: unexpected Content-Range "${response.headers.get("Content-Range")}"`);
    }
    const total = Number(range[3]);
    if (this.size && total !== this.size) {
      throw new ModelError("changed", `${this.url} changed on the server (was ${this.size} bytes, now ${total})`);
    }
    const want = Number(range[2]) - start + 1;
    const reader = response.body.getReader();
    let got = 0;
    for (;;) {
      silence();
      let next;
      try {
        next = await reader.read();
      } catch (error) {
        throw stalled(error);
      }
      if (next.done) break;
      got += next.value.length;
      try {
        sink(next.value);
      } catch (error) {
        reader.cancel().catch(() => {});
        throw error;
      }
    }
    if (got !== want) throw new Error(`connection closed after ${got} of ${want} bytes`);
    return { total, validator: response.headers.get("ETag") || response.headers.get("Last-Modified") || "" };
  }

  // Sync access handles (workers only) rather than createWritable, which not every browser has.
  async #truncate(size) {
    const handle = await this.fileHandle.createSyncAccessHandle();
    try {
      handle.truncate(size);
      handle.flush();
    } finally {
      handle.close();
    }
  }

  async #readMeta() {
    try {
      const handle = await this.dir.getFileHandle(`${this.key}.json`);
      return JSON.parse(await (await handle.getFile()).text());
    } catch {
      return null;
    }
  }

  async #writeMeta() {
    const file = await this.dir.getFileHandle(`${this.key}.json`, { create: true });
    const handle = await file.createSyncAccessHandle();
    try {
      // Overwritten in place, padded to whole KiB: the file keeps its size, so a full storage cannot leave it
      // truncated (a write that needs more space fails before it changes a byte).
      const json = JSON.stringify({ ...this.meta, have: this.have });
      const bytes = new TextEncoder().encode(json.padEnd(Math.ceil((json.length + 1) / 1024) * 1024, " "));
      handle.write(bytes, { at: 0 });
      if (handle.getSize() > bytes.length) handle.truncate(bytes.length);
      handle.flush();
    } finally {
      handle.close();
    }
  }
}

function mib(bytes) {
  return `${(bytes / 2 ** 20).toFixed(bytes < 10 * 2 ** 20 ? 1 : 0)} MiB`;
}

// The name in OPFS of the files for `text` (a model's absolute URL, a kept conversation's key), or the tag of a
// Python snapshot (its wheels' digests): the first 32 hex digits of its sha256.
export async function storageName(text) {
  return (await sha256Hex(new TextEncoder().encode(text))).slice(0, 32);
}

export async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

// Remove the files a model's bytes and metadata are kept in (those of `key`, a storageName).
export async function removeFiles(dir, key) {
  await dir.removeEntry(`${key}.gguf`).catch(() => {});
  await dir.removeEntry(`${key}.json`).catch(() => {});
}

// Refuse before downloading when the origin's storage quota cannot hold what is missing of `stores` (the shards
// of one model count together).
export async function checkQuota(stores) {
  if (!navigator.storage?.estimate) return;
  const need = stores.reduce((n, s) => n + (s.complete ? 0 : s.size - s.have), 0);
  if (!need) return;
  const { quota = Infinity, usage = 0 } = await navigator.storage.estimate();
  if (quota - usage < need) {
    // Files that hold no byte yet are not kept as downloads to resume: nothing of the model stays behind.
    for (const store of stores) if (!store.have) await store.remove();
    throw await quotaError(stores.reduce((n, s) => n + s.size, 0), need, stores[0].url, { quota, usage });
  }
}

// The message of a full storage: the model's size, what is missing of it, and what this site may still use.
async function quotaError(size, need, url, estimate = null) {
  const { quota = Infinity, usage = 0 } = estimate ?? (await navigator.storage?.estimate?.().catch(() => null)) ?? {};
  const room = Number.isFinite(quota) ? Math.max(0, quota - usage) : null;
  // The estimate is advisory: a browser may refuse a write with room left on paper (disk space, an override).
  const space = room === null || room >= need
    ? `, and the browser refused to store more for this site (it reports ${room === null ? "an unknown amount" :
      mib(room)} free, but the disk or the browser's own limits decide)`
    : `, and the browser lets this site store ${mib(room)} more (it uses ${mib(usage)} of ${mib(quota)})`;
  const error = new ModelError("quota", `not enough storage for the model ${url}: it is ${mib(size)}` +
    (need < size ? ` (${mib(need)} still to download)` : "") + `${space}. Delete ` +
    "stored models you no longer need, or free space in the browser's site settings, or use a smaller model; " +
    "what was downloaded is kept and the download resumes from there.");
  Object.assign(error, { size, need, quota, usage });
  return error;
}
