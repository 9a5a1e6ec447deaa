// Hugging Face references in the browser: `hf://ORG/REPO/FILE.gguf[@REV]`, `ORG/REPO:QUANT`,
// `hf.co/ORG/REPO[:QUANT]` become the file's URL, `{endpoint}/{repo}/resolve/{revision}/{file}`.
//
// The rules are core/hub_ref.py's, written again here only because the download starts before Python has booted;
// tests/data/hub_references.json holds both to the same answers. The short form asks the hub for the repository's
// file list first (one small JSON request).

import { shardName, shardNumber } from "./shards.js";

export const HUB_ENDPOINT = "https://huggingface.co";
const DEFAULT_QUANT = "Q4_K_M";
const NAME = "[A-Za-z0-9][A-Za-z0-9._-]*";
const SHORT = new RegExp(`^(${NAME}/${NAME})(?::(${NAME}))?$`);
const HF_URI = new RegExp(`^(${NAME}/${NAME})(?:@([^/:@]+))?(?:/(.+)|:(${NAME}))?$`);
const USAGE = "write hf://ORG/REPO/FILE.gguf (optionally @REVISION) or hf://ORG/REPO:QUANT";

export class HubError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

const notFound = (message) => new HubError("model-not-found", message);

// {repo, revision, file, quant} for a hub reference, null for anything else (a URL or a path).
export function parseHubRef(text) {
  const lower = text.toLowerCase();
  if (lower.startsWith("hf://")) return parseHfUri(text, text.slice(5));
  for (const prefix of ["hf.co/", "huggingface.co/"]) {
    if (!lower.startsWith(prefix)) continue;
    const m = SHORT.exec(text.slice(prefix.length));
    if (!m) throw notFound(`'${text}' is not a Hugging Face reference: write ${prefix}ORG/REPO or ${prefix}ORG/REPO:QUANT`);
    return { repo: m[1], revision: "main", file: null, quant: m[2] ?? null };
  }
  const m = SHORT.exec(text);
  return m && m[2] ? { repo: m[1], revision: "main", file: null, quant: m[2] } : null;
}

function parseHfUri(text, body) {
  const m = HF_URI.exec(body);
  if (!m) throw notFound(`'${text}' is not a Hugging Face reference: ${USAGE}`);
  let [, repo, revision, path, quant] = m;
  if (path !== undefined) {
    const at = path.lastIndexOf("@");
    if (at >= 0 && path.slice(0, at).toLowerCase().endsWith(".gguf")) {
      if (revision !== undefined) throw notFound(`'${text}' gives the revision twice: ${USAGE}`);
      [path, revision] = [path.slice(0, at), path.slice(at + 1)];
    }
    if (!path.toLowerCase().endsWith(".gguf")) throw notFound(`'${text}' does not name a .gguf file: ${USAGE}`);
    if (path.split("/").some((p) => p === "" || p === "." || p === "..")) {
      throw notFound(`'${text}': '${path}' is not a file path inside the repository`);
    }
  }
  revision = revision ? decodeURIComponent(revision) : "main";
  return { repo, revision, file: path ?? null, quant: quant ?? null };
}

// Python's urllib.parse.quote: encodeURIComponent leaves !'()* alone, quote does not.
const quote = (text) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

export function hubFileURL(ref, path, endpoint = HUB_ENDPOINT) {
  return `${endpoint.replace(/\/+$/, "")}/${ref.repo}/resolve/${quote(ref.revision)}/` +
    path.split("/").map(quote).join("/");
}

function namedFiles(file) {
  const shard = shardNumber(file);
  if (!shard) return [file];
  return Array.from({ length: shard[1] }, (_, i) => shardName(file, i, shard[1]));
}

function models(paths) {
  const found = new Map(); // first file -> {files, count}
  for (const path of paths) {
    const base = path.split("/").pop().toLowerCase();
    if (!base.endsWith(".gguf") || base.includes("mmproj")) continue;
    const shard = shardNumber(path);
    const count = shard ? shard[1] : 1;
    const key = shard ? shardName(path, 0, count) : path;
    if (!found.has(key)) found.set(key, { files: [], count });
    found.get(key).files.push(path);
  }
  const list = [...found.values()];
  for (const model of list) model.files.sort();
  return list.sort((a, b) => (a.files[0].toLowerCase() < b.files[0].toLowerCase() ? -1 : 1));
}

const describe = (m) => (m.count === 1 ? m.files[0] : `${m.files[0]} (+${m.count - 1} more shard${m.count > 2 ? "s" : ""})`);
const offer = (list) => (list.length ? `; it has: ${list.map(describe).join("; ")}. Name one as ORG/REPO:QUANT or ` +
  "hf://ORG/REPO/FILE.gguf" : "; it has no GGUF files");
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// The repository file(s) `ref` means among `paths`: one file, or the shards of one split model in order.
export function chooseHubFiles(ref, paths) {
  const where = ref.repo + (ref.revision === "main" ? "" : `@${ref.revision}`);
  if (ref.file !== null) {
    const missing = namedFiles(ref.file).filter((f) => !paths.includes(f));
    if (missing.length) throw notFound(`${where} has no file ${missing[0]}${offer(models(paths))}`);
    return namedFiles(ref.file);
  }
  const all = models(paths);
  if (!all.length) throw notFound(`${where} has no GGUF files`);
  const quant = ref.quant ?? DEFAULT_QUANT;
  const token = new RegExp(`(?<![A-Za-z0-9])${escape(quant)}(?![A-Za-z0-9]|_[A-Za-z0-9])`, "i");
  let matches = all.filter((m) => token.test(m.files[0]));
  if (!matches.length && ref.quant === null && all.length === 1) matches = all;
  if (!matches.length) throw notFound(`${where} has no GGUF file for quantization ${quant}${offer(all)}`);
  if (matches.length > 1) {
    throw notFound(`${where}:${quant} matches ${matches.length} models: ${matches.map(describe).join("; ")}; ` +
      `name one as hf://${ref.repo}/FILE.gguf`);
  }
  const [model] = matches;
  if (model.files.length !== model.count) {
    throw notFound(`${where} lists only ${model.files.length} of the ${model.count} shards of ${model.files[0]}`);
  }
  return model.files;
}

// The URL to download for `model`: hub references become the file's hub URL, anything else comes back unchanged.
export async function resolveModelURL(model, { endpoint = HUB_ENDPOINT, fetch = globalThis.fetch } = {}) {
  const ref = parseHubRef(model);
  if (!ref) return model;
  let files;
  if (ref.file !== null) files = namedFiles(ref.file);
  else {
    const base = endpoint.replace(/\/+$/, "");
    const url = `${base}/api/models/${ref.repo}/revision/${quote(ref.revision)}`;
    let response;
    try {
      response = await fetch(url);
    } catch (error) {
      throw new HubError("network", `could not list ${ref.repo} on ${base}: ${error.message}`);
    }
    if (!response.ok) {
      throw response.status === 401 || response.status === 404 ?
        notFound(`${ref.repo} was not found on ${base} (HTTP ${response.status})`) :
        new HubError("network", `${url}: HTTP ${response.status}`);
    }
    const info = await response.json();
    files = chooseHubFiles(ref, (info.siblings || []).map((s) => s.rfilename));
  }
  // A split model is named by its first shard: the worker finds the others beside it (core/gguf.py's rules).
  return hubFileURL(ref, files[0], endpoint);
}
