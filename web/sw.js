// Offline support for the chat app: Cache Storage keeps the app shell, the Pyodide interpreter and the wheels,
// so a second visit starts without the network. Models are not cached here: model-store.js keeps them in OPFS,
// resumable and readable by range, and their (Range) requests pass straight through.
//
// Shell files are answered from the cache and refreshed in the background (a new version shows on the next
// visit); web/dist files only change with a new build and are answered from the cache alone.

const CACHE = "llmchat-v1";
const SHELL = ["./", "index.html", "llm-chat.js", "engine.js", "worker.js", "gpu.js", "model-store.js", "sha256.js",
  "manifest.webmanifest", "icon.svg"];
const DIST = "dist/";

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    await cache.addAll(SHELL);
    // dist/manifest.json (written by tools/build_web_dist.py) lists the interpreter's files and the wheels.
    const response = await fetch(DIST + "manifest.json", { cache: "no-cache" });
    const manifest = await response.clone().json();
    await cache.put(DIST + "manifest.json", response);
    await cache.addAll(manifest.files.map((name) => `${DIST}pyodide/${name}`));
    await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) if (name !== CACHE) await caches.delete(name);
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
  const inDist = url.pathname.includes(`/${DIST}`) && !url.pathname.endsWith("/manifest.json");
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    const cached = await cache.match(request, { ignoreSearch: request.mode === "navigate" });
    if (cached && inDist) return cached;
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
