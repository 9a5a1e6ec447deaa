// How llmchat is installed into Pyodide and how a snapshot of that interpreter is named: shared by the worker
// (web/worker.js, in the page) and the web build (tools/build/python_snapshot.mjs, under Node), so the snapshot the build
// serves holds exactly what the worker would have made itself.

import { storageName } from "./model-store.js";

// A memory snapshot of the interpreter with llmchat installed and imported: the first 32 bytes are its tag
// (snapshotTag), the rest is Pyodide's snapshot. The worker keeps one in OPFS under this name; web/dist serves one
// gzip-compressed under SERVED_SNAPSHOT, made by the build, for a first visit.
export const SNAPSHOT_FILE = "llmchat-python.snapshot";
export const SERVED_SNAPSHOT = SNAPSHOT_FILE + ".gz";

// Our wheels are pure Python: installed by unpacking them into site-packages, as Pyodide's loadPackage does for
// such wheels. Not with loadPackage: it leaves JS references in the interpreter, and Pyodide then refuses to
// snapshot it. A function, so that nothing of it stays in the snapshot's globals.
const INSTALL = `
def _install(names):
    import importlib, os, site, zipfile
    for name in names:
        with zipfile.ZipFile("/tmp/" + name) as wheel:
            wheel.extractall(site.getsitepackages()[0])
        os.remove("/tmp/" + name)
    importlib.invalidate_caches()
_install(NAMES)
del _install
`;

// Unpack `wheels` (lock entries) whose bytes are `files` into `py`'s site-packages. A restored snapshot needs this
// too: it holds the imported modules, not the file system.
export function installWheels(py, wheels, files) {
  for (const [i, bytes] of files.entries()) py.FS.writeFile("/tmp/" + wheels[i].file_name, bytes);
  py.runPython(INSTALL.replace("NAMES", JSON.stringify(wheels.map((w) => w.file_name))));
}

// Boot Pyodide (`loadPyodide` with `options`), install `wheels` from `files`, import llmchat's browser runtime and
// snapshot the interpreter: {py, parts}, the snapshot file's bytes being parts' concatenation (tag, snapshot). The
// worker does this where no snapshot could be restored; the web build, to serve one.
export async function bootAndSnapshot(loadPyodide, options, wheels, files) {
  const py = await loadPyodide({ ...options, _makeSnapshot: true });
  installWheels(py, wheels, files);
  py.runPython("import llmchat.browser.runtime");
  return { py, parts: [await snapshotTag(wheels), py.makeMemorySnapshot()] };
}

// Pyodide restored from `snapshot` (Pyodide's bytes, without our tag) by `loadPyodide` with `options`. Pyodide sizes
// the heap for a snapshot with a setting its module never reads (the memory is declared in the wasm, not imported:
// pyodide/pyodide#6254), so the heap starts at the build's 30 MiB and a snapshot of a heap that grew past that fails
// to restore ("offset is out of bounds"); a boot that happened to grow the heap made a snapshot no load could use.
// So the module is made here, the heap grown to the snapshot's size before Pyodide copies the snapshot in.
export async function restoreSnapshot(loadPyodide, options, snapshot) {
  const { default: createModule } = await import(options.indexURL + "pyodide.asm.mjs");
  const grow = (module) => {
    if (module.HEAP8.length < snapshot.length) module.growMemory(snapshot.length);
  };
  const createPyodideModule = (settings) => createModule(Object.assign(settings, {
    preRun: [...settings.preRun, grow] }));
  return loadPyodide({ ...options, _loadSnapshot: snapshot, createPyodideModule });
}

// `name` and the packages it depends on, from Pyodide's lock file: [{file_name, sha256, ...}]. All pure Python
// (tools/build/build_web_dist.py serves no other): installWheels unpacks files and would not load a binary extension.
export function requiredWheels(lock, name = "llmchat", seen = new Map()) {
  const entry = lock.packages?.[name];
  if (!entry) throw new Error(`pyodide-lock.json has no package '${name}'`);
  if (!entry.file_name?.endsWith("-py3-none-any.whl")) throw new Error(`${entry.file_name} is not a pure wheel`);
  if (!seen.has(name)) {
    seen.set(name, entry);
    for (const dependency of entry.depends ?? []) requiredWheels(lock, dependency, seen);
  }
  return [...seen.values()];
}

// The tag of a snapshot holding `wheels`' modules (32 bytes): another build of llmchat has another one, so its
// snapshot is refused rather than restored with modules that no longer match the files.
export async function snapshotTag(wheels) {
  return new TextEncoder().encode(await storageName(wheels.map((w) => w.sha256).join()));
}
