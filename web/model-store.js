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

const DIR = "llmchat-models";
const PROBE = 1 << 20; // the first request also brings the start of the header
const CHUNK = 16 << 20; // one Range request per chunk while downloading: a dropped connection costs little
const FLUSH_EVERY = 32 << 20;

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
  // options: integrity, onProgress({phase, loaded, total}), retries (consecutive failures), backoffMs
  static async open(url, options = {}) {
    const store = new ModelStore(new URL(url, self.location.href).href, options);
    await store.#init();
    return store;
  }

  constructor(url, { integrity = null, onProgress = () => {}, retries = 6, backoffMs = 250 } = {}) {
    this.url = url;
    this.expected = integrityHex(integrity);
    this.onProgress = onProgress;
    this.retries = retries;
    this.backoffMs = backoffMs;
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

  async #init() {
    const root = await navigator.storage.getDirectory();
    this.dir = await root.getDirectoryHandle(DIR, { create: true });
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(this.url));
    this.key = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("").slice(0, 32);
    this.fileHandle = await this.dir.getFileHandle(`${this.key}.gguf`, { create: true });
    this.meta = await this.#readMeta();
    const onDisk = (await this.fileHandle.getFile()).size;
    if (this.meta?.complete && this.meta.size === onDisk &&
        (!this.expected || this.meta.sha256 === this.expected)) {
      // Cached and verified: no network at all (this is what makes the second visit work offline).
      Object.assign(this, { size: onDisk, have: onDisk, complete: true, fromCache: true });
      return;
    }
    const { body, total, validator } = await this.#fetchRange(0, PROBE - 1);
    this.size = total;
    this.probe = body;
    const same = this.meta && this.meta.size === total && this.meta.validator === validator && !this.meta.complete;
    this.have = same ? Math.min(onDisk, total) : 0;
    this.meta = { url: this.url, size: total, validator, sha256: null, complete: false };
    if (!same) await this.#truncate(0);
    await this.#writeMeta();
  }

  // Bytes [offset, offset + length): from disk when downloaded, else from the network.
  async read(offset, length) {
    if (offset + length <= this.have) {
      const file = await this.fileHandle.getFile();
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
    if (this.complete || !navigator.storage?.estimate) return;
    const { quota = Infinity, usage = 0 } = await navigator.storage.estimate();
    const need = this.size - this.have;
    if (quota - usage < need) {
      throw new ModelError("quota", `not enough storage for the model: it needs ${mib(need)} more and this site ` +
        `may use ${mib(Math.max(0, quota - usage))}; free some space or use a smaller model`);
    }
  }

  // Download what is missing, resuming after failures, then verify. Safe to call on a complete store.
  async download() {
    if (this.complete) {
      this.onProgress({ phase: "download", loaded: this.size, total: this.size, cached: true });
      return;
    }
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
        const start = this.have;
        const end = Math.min(this.size, start + CHUNK) - 1;
        try {
          await this.#streamRange(start, end, (piece) => {
            handle.write(piece, { at: this.have });
            hash?.update(piece);
            this.have += piece.length;
            sinceFlush += piece.length;
            this.onProgress({ phase: "download", loaded: this.have, total: this.size });
          });
          failures = 0;
        } catch (error) {
          if (error instanceof ModelError) throw error;
          if (this.have > start) failures = 0; // it moved: only consecutive failures without progress count
          if (++failures > this.retries) {
            throw new ModelError("network", `the download of ${this.url} failed ${failures} times in a row at ` +
              `byte ${this.have} of ${this.size} (${error.message}); it will resume from there next time`);
          }
          handle.flush();
          await this.#writeMeta();
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

  // Forget this model (bytes and metadata).
  async remove() {
    await this.dir.removeEntry(`${this.key}.gguf`).catch(() => {});
    await this.dir.removeEntry(`${this.key}.json`).catch(() => {});
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
        if (error instanceof ModelError || ++failures > this.retries) throw error;
        await sleep(Math.min(8000, this.backoffMs * 2 ** (failures - 1)));
      }
    }
  }

  // GET bytes [start, end] and hand the body to `sink` piece by piece as it arrives.
  async #streamRange(start, end, sink) {
    this.requests++;
    let response;
    try {
      response = await fetch(this.url, { headers: { Range: `bytes=${start}-${end}` }, cache: "no-store" });
    } catch (error) {
      throw new Error(`request failed: ${error.message}`);
    }
    if (response.status === 200) {
      response.body?.cancel();
      throw new ModelError("range", `the server of ${this.url} ignores HTTP Range requests; llmchat needs them ` +
        "to download a model in resumable parts");
    }
    if (response.status !== 206) {
      const code = response.status === 404 ? "not-found" : response.status >= 500 ? null : "http";
      if (code) throw new ModelError(code, `${this.url}: HTTP ${response.status} ${response.statusText}`);
      throw new Error(`HTTP ${response.status}`);
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
      const { done, value } = await reader.read();
      if (done) break;
      got += value.length;
      sink(value);
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
      const bytes = new TextEncoder().encode(JSON.stringify({ ...this.meta, have: this.have }));
      handle.truncate(0);
      handle.write(bytes, { at: 0 });
      handle.flush();
    } finally {
      handle.close();
    }
  }
}

function mib(bytes) {
  return `${(bytes / 2 ** 20).toFixed(0)} MiB`;
}
