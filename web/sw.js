// Offline support for the chat app: Cache Storage keeps the app shell, the Pyodide interpreter and the wheels,
// so a second visit starts without the network. Models are not cached here: model-store.js keeps them in OPFS,
// resumable and readable by range, and their (Range) requests pass straight through.
//
// Two kinds of files, two policies:
// - the shell (pages, scripts, manifest) is answered from the cache and refreshed in the background, so a new
//   version shows on the next visit;
// - web/dist (interpreter, wheels, lock file) must stay consistent with itself: the lock file names each wheel's
//   sha256. dist/manifest.json carries a build id; each build gets its own cache, filled completely before it
//   replaces the previous one. Every page load checks the id (one small request; offline, the cache stands).

const SHELL_CACHE = "llmchat-shell-v1";
const DIST_PREFIX = "llmchat-dist-";
const SHELL = ["./", "index.html", "llm-chat.js", "llm-chat-style.js", "storage-panel.js", "engine.js",
  "engine-link.js", "messages.js", "request-defaults.js", "worker.js", "python.js", "gpu.js", "model-store.js",
  "stored-models.js", "shards.js", "sha256.js", "hub.js", "adapter.js", "markdown.js", "clipboard.js",
  "chat-store.js", "manifest.webmanifest", "icon.svg"];
const DIST = new URL("dist/", self.registration.scope).href;

let distCache = null; // the cache of the build in use

async function currentDist() {
  if (!distCache) {
    const name = (await caches.keys()).find((key) => key.startsWith(DIST_PREFIX));
    distCache = name ? await caches.open(name) : null;
  }
  return distCache;
}

// Make the newest build of web/dist the cached one (a no-op when it already is).
async function syncDist() {
  const manifest = await (await fetch(DIST + "manifest.json", { cache: "no-cache" })).json();
  const name = DIST_PREFIX + manifest.build;
  const keys = await caches.keys();
  if (!keys.includes(name)) {
    const fresh = await caches.open(name);
    try {
      await fresh.addAll(manifest.files.map((file) => `${DIST}pyodide/${file}`));
    } catch (error) {
      await caches.delete(name); // half a build is worse than the old one
      throw error;
    }
  }
  distCache = await caches.open(name);
  for (const key of keys) if (key.startsWith(DIST_PREFIX) && key !== name) await caches.delete(key);
}

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    await (await caches.open(SHELL_CACHE)).addAll(SHELL);
    await syncDist();
    await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const key of await caches.keys()) {
      if (key !== SHELL_CACHE && !key.startsWith(DIST_PREFIX)) await caches.delete(key);
    }
    await self.clients.claim();
  })());
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method !== "GET" || url.origin !== location.origin || request.headers.has("Range") ||
      url.pathname.endsWith(".gguf")) {
    return; // models and anything dynamic: the network, untouched
  }
  if (request.url.startsWith(DIST)) {
    event.respondWith((async () => (await (await currentDist())?.match(request)) || fetch(request))());
    return;
  }
  if (request.mode === "navigate") event.waitUntil(syncDist().catch(() => {})); // offline: keep what we have
  event.respondWith((async () => {
    const cache = await caches.open(SHELL_CACHE);
    const cached = await cache.match(request, { ignoreSearch: request.mode === "navigate" });
    const network = fetch(request).then((response) => {
      if (response.ok && response.type === "basic") cache.put(request, response.clone());
      return response;
    });
    if (cached) {
      event.waitUntil(network.catch(() => {}));
      return cached;
    }
    return network;
  })());
});
