// The models and kept conversation caches this origin stores, for a page to list and delete (no engine or worker
// needed): the store's files (model-store.js writes them) read as models, split models' shards grouped under their
// first shard's URL.

import { DIR, ModelError, removeFiles, storageName } from "./model-store.js";
import { shardName, shardNumber } from "./shards.js";

async function modelsDir(create = false) {
  return folder(DIR, create);
}

async function folder(name, create) {
  if (!navigator.storage?.getDirectory) return null;
  const root = await navigator.storage.getDirectory();
  try {
    return await root.getDirectoryHandle(name, { create });
  } catch {
    return null;
  }
}

// Conversations' KV caches the engine keeps (requests with prompt_cache_key; worker.js writes them): one file each,
// named by the key's digest (storageName), in this folder.
const CHATS_DIR = "llmchat-chats";

export async function chatsDir(create = false) {
  return folder(CHATS_DIR, create);
}

// [{name, bytes}] of the kept conversations; one being written right now counts as 0 bytes.
async function chatFiles() {
  const dir = await chatsDir();
  const files = [];
  if (dir) {
    for await (const [name, handle] of dir.entries()) {
      if (handle.kind === "file") files.push({ name, bytes: await handle.getFile().then((f) => f.size, () => 0) });
    }
  }
  return files;
}

// Deletes every kept conversation cache (the conversations' text stays: the next request computes its KV cache
// again); resolves with the bytes freed. One a reply is saving right now stays.
export async function deleteConversations() {
  const dir = await chatsDir();
  let freed = 0;
  for (const file of await chatFiles()) {
    if (await dir.removeEntry(file.name).then(() => true, () => false)) freed += file.bytes;
  }
  return freed;
}

// Every file the store holds, with its metadata: [{key, url, size, have, complete, sha256, stored, bytes}].
async function storedFiles() {
  const dir = await modelsDir();
  if (!dir) return [];
  const files = new Map();
  for await (const [name, handle] of dir.entries()) {
    const match = /^([0-9a-f]{32})\.(gguf|json)$/.exec(name);
    if (!match || handle.kind !== "file") continue;
    const entry = files.get(match[1]) ?? { key: match[1], bytes: 0, meta: null };
    let file;
    try {
      file = await handle.getFile();
    } catch { // being written by a download right now (its sync access handle is open)
      entry.busy = true;
      files.set(match[1], entry);
      continue;
    }
    if (match[2] === "gguf") {
      entry.bytes = file.size;
      entry.modified = file.lastModified;
    } else {
      try { entry.meta = JSON.parse(await file.text()); } catch { entry.meta = null; }
    }
    files.set(match[1], entry);
  }
  return [...files.values()];
}

// The models in this origin's store, shards of a split model grouped under their first shard's URL:
// [{url, size (bytes of the whole model), stored (bytes on disk), date (ISO, last written), complete, partial,
//   sha256 (hex, only when the download was checked against an integrity the page gave), files (shard URLs)}].
// A partial entry is a download that stopped (network, full storage, a closed tab): it resumes on the next load.
export async function listModels() {
  const groups = new Map();
  for (const file of await storedFiles()) {
    const meta = file.meta;
    const url = meta?.url ?? null;
    const shard = url && shardNumber(url);
    const id = shard ? shardName(url, 0, shard[1]) : url ?? file.key; // a split model: under its first shard
    const group = groups.get(id) ?? { url: id, size: 0, stored: 0, date: 0, complete: true, files: [], sha256: [],
      count: shard ? shard[1] : 1 };
    group.size += meta?.size ?? 0;
    group.stored += file.busy ? meta?.have ?? 0 : file.bytes;
    group.date = Math.max(group.date, file.modified ?? 0);
    group.complete &&= Boolean(!file.busy && meta?.complete && meta.size === file.bytes);
    group.files.push(url ?? file.key);
    group.sha256.push(meta?.sha256 ?? null);
    groups.set(id, group);
  }
  return [...groups.values()].map((g) => {
    const complete = g.complete && g.files.length === g.count;
    const order = g.files.map((f, i) => [f, g.sha256[i]]).sort(([a], [b]) => (a < b ? -1 : 1));
    const hashes = order.map(([, h]) => h);
    return { url: g.url, size: g.size, stored: g.stored, date: g.date ? new Date(g.date).toISOString() : null,
      complete, partial: !complete, sha256: hashes.every(Boolean) ? (hashes.length === 1 ? hashes[0] : hashes) : null,
      files: order.map(([f]) => f) };
  }).sort((a, b) => (a.url < b.url ? -1 : 1));
}

// Whether the model at `url` (any shard's URL for a split model) is stored whole, ready to load offline.
export async function hasModel(url) {
  const want = absolute(url);
  return (await listModels()).some((m) => m.complete && (m.url === want || m.files.includes(want)));
}

// Remove every piece of the model at `url` (all shards of a split model, partial downloads, metadata). Resolves
// with the bytes freed; throws ModelError "busy" while a tab of this site is downloading it.
export async function deleteModel(url) {
  const want = absolute(url);
  const model = (await listModels()).find((m) => m.url === want || m.files.includes(want));
  const dir = await modelsDir();
  if (!model || !dir) return 0;
  for (const file of model.files) {
    const key = /^[0-9a-f]{32}$/.test(file) ? file : await storageName(file);
    const job = () => removeFiles(dir, key);
    if (!navigator.locks) await job();
    else {
      await navigator.locks.request(`llmchat-model:${key}`, { ifAvailable: true }, async (lock) => {
        if (!lock) throw new ModelError("busy", `${file} is being downloaded by a tab of this site; stop it first`);
        await job();
      });
    }
  }
  return model.stored;
}

// What the browser lets this site store and what it uses (navigator.storage.estimate), with what llmchat's
// models and kept conversation caches take of it: {quota, usage, free, models, conversations (bytes), persisted}.
export async function storageEstimate() {
  const { quota = null, usage = null } = (await navigator.storage?.estimate?.().catch(() => null)) ?? {};
  const models = (await storedFiles()).reduce((n, f) => n + f.bytes, 0);
  const conversations = (await chatFiles()).reduce((n, f) => n + f.bytes, 0);
  const persisted = (await navigator.storage?.persisted?.().catch(() => false)) ?? false;
  return { quota, usage, free: quota === null ? null : Math.max(0, quota - usage), models, conversations, persisted };
}

function absolute(url) {
  return new URL(url, globalThis.location?.href).href;
}
