// Runs pytest inside Pyodide under Node, against the runtime exactly as pages get it.
//
// The interpreter, the llmchat wheel and its dependencies (jinja2, a pure markupsafe) come from web/dist and are
// installed through its pyodide-lock.json, so Pyodide checks each wheel's sha256 as it would in a browser. pytest
// and its own dependencies are pure wheels passed by path; they are test tools and are never served to pages.
//
//   node run_pytest.mjs CONFIG.json
//
// CONFIG: {"dist": "web/dist/pyodide", "wheels": [...], "mounts": {"/guest": "/host", ...},
//          "env": {...}, "cwd": "/guest/dir", "args": ["pytest", "arguments"]}
// The exit status is pytest's.
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const dist = path.resolve(config.dist) + "/";
const { loadPyodide } = await import(pathToFileURL(dist + "pyodide.mjs").href);

const pyodide = await loadPyodide({ indexURL: dist, lockFileURL: dist + "pyodide-lock.json" });
await pyodide.loadPackage(["llmchat"], { checkIntegrity: true });
await pyodide.loadPackage(config.wheels ?? []);

for (const [guest, host] of Object.entries(config.mounts ?? {})) {
  pyodide.FS.mkdirTree(guest);
  pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root: host }, guest);
}
const args = pyodide.toPy(config.args ?? []);
const env = pyodide.toPy(config.env ?? {});
const main = pyodide.runPython(`
import os, sys

def main(args, env, cwd):
    # The mounted tree is the host's: leave no bytecode or pytest cache behind in it.
    sys.dont_write_bytecode = True
    os.environ.update(env)
    os.chdir(cwd)
    import pytest
    print(f"pyodide: Python {sys.version.split()[0]} on {sys.platform}", flush=True)
    return int(pytest.main(["-p", "no:cacheprovider", *args]))
main
`);
const status = main(args, env, config.cwd ?? "/");
process.exitCode = status;
