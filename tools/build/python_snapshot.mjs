// Makes the Python snapshot web/dist serves (web/python.js SERVED_SNAPSHOT) with the worker's own code
// (bootAndSnapshot): Pyodide from the folder, llmchat and its dependencies installed from the folder's wheels and
// imported, Pyodide's memory snapshot tagged, then gzip-compressed. A page's first visit restores it instead of
// booting.
//
//   node tools/build/python_snapshot.mjs web/dist/pyodide
//
// Needs a Node whose WebAssembly has JS promise integration (WebAssembly.Suspending), as Chromium's has: Pyodide
// records at start whether it can suspend, and a snapshot made without it fails in the page at the first call that
// waits on a promise. tools/build/build_web_dist.py finds such a Node.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";

import { SERVED_SNAPSHOT, bootAndSnapshot, requiredWheels } from "../../web/python.js";

if (!("Suspending" in WebAssembly)) {
  console.error(`python_snapshot: Node ${process.version} has no WebAssembly.Suspending (JSPI)`);
  process.exit(2);
}
const dist = path.resolve(process.argv[2]) + "/";
const { loadPyodide } = await import(pathToFileURL(dist + "pyodide.mjs").href);
const lock = JSON.parse(readFileSync(dist + "pyodide-lock.json", "utf8"));
const wheels = requiredWheels(lock);
const { parts } = await bootAndSnapshot(loadPyodide, { indexURL: dist, lockFileContents: lock, stdout: () => {} },
  wheels, wheels.map((w) => readFileSync(dist + w.file_name)));
const bytes = Buffer.concat(parts);
writeFileSync(dist + SERVED_SNAPSHOT, gzipSync(bytes, { level: 9 }));
console.log(`python_snapshot: ${dist}${SERVED_SNAPSHOT} (${bytes.length} bytes before compression)`);
