// Runs one Python script inside Pyodide under Node, with llmchat installed from web/dist as pages install it
// (through its pyodide-lock.json, each wheel's sha256 checked). For measurements of the core as the browser runs it.
//
//   node tools/build/pyodide_run.mjs CONFIG.json
//
// CONFIG: {"dist": "web/dist/pyodide", "mounts": {"/guest": "/host", ...}, "cwd": "/guest/dir",
//          "argv": ["script.py", "arguments"...], "packages": ["llmchat"] (the default; [] loads none)}
// The exit status is the script's (SystemExit code, 1 on an uncaught exception).
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const dist = path.resolve(config.dist) + "/";
const { loadPyodide } = await import(pathToFileURL(dist + "pyodide.mjs").href);

const pyodide = await loadPyodide({ indexURL: dist, lockFileURL: dist + "pyodide-lock.json" });
const packages = config.packages ?? ["llmchat"];
if (packages.length) await pyodide.loadPackage(packages, { checkIntegrity: true });
for (const [guest, host] of Object.entries(config.mounts ?? {})) {
  pyodide.FS.mkdirTree(guest);
  pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root: host }, guest);
}
const run = pyodide.runPython(`
import os, runpy, sys, traceback

def run(argv, cwd):
    sys.dont_write_bytecode = True  # the mounted tree is the host's
    os.chdir(cwd)
    sys.argv = list(argv)
    print(f"pyodide: Python {sys.version.split()[0]} on {sys.platform}", flush=True)
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        return 1
    return 0
run
`);
process.exitCode = run(pyodide.toPy(config.argv), config.cwd ?? "/");
