"""Build web/dist: what the browser runtime loads from our own origin, so a page needs no CDN and works offline.

    web/dist/pyodide/   the interpreter from the pinned npm package `pyodide` (node_modules/pyodide), plus
                        llmchat-*.whl, jinja2-*.whl, markupsafe-*.whl (a pure build), each with its modules'
                        bytecode compiled by that interpreter, and pyodide-lock.json listing them with their
                        sha256 (Pyodide checks it when it installs a package), and llmchat-python.snapshot.gz:
                        that interpreter with them installed and imported (tools/build/python_snapshot.mjs), which a
                        page's first visit restores instead of booting Python

With `--test-wheels DIR` it downloads, instead, the pure wheels pytest needs, for running the core's tests inside
Pyodide under Node (they are never served to pages; only `make test` asks for them).

The lock file is Pyodide's own (from the npm package) with our wheels added by tools/build/pyodide_lock.py: the entries
`pyodide lockfile add-wheels` (pyodide-build) would write, byte for byte, made with the standard library, so
everything runs under the interpreter that runs this script (the project's venv, Python >= 3.11).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pyodide_lock import add_wheels, write as write_lock

ROOT = Path(__file__).resolve().parents[2]
PYODIDE_NPM = ROOT / "node_modules" / "pyodide"
# Pinned so the served bytes (and their sha256 in the lock file) only change when we decide.
RUNTIME_WHEELS = ["jinja2==3.1.6"]
MARKUPSAFE = "markupsafe==3.0.3"
TEST_WHEELS = ["pytest==9.2.0", "pluggy==1.7.0", "iniconfig==2.3.1", "packaging==26.4", "pygments==2.21.0"]
# The interpreter files a page (or Node) loads; the npm package's own lock file is the input of ours.
PYODIDE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip"]


def run(*command: str | os.PathLike, **kwargs) -> None:
    print("+", " ".join(str(c) for c in command), flush=True)
    subprocess.run([str(c) for c in command], check=True, **kwargs)


def pip(*args: str | os.PathLike, **kwargs) -> None:
    run(sys.executable, "-m", "pip", "--disable-pip-version-check", *args, **kwargs)


def build_wheels(out: Path) -> list[Path]:
    """llmchat (from this tree), jinja2 (PyPI's pure wheel), markupsafe (a pure build of its sdist)."""
    with tempfile.TemporaryDirectory() as scratch:
        # Build from a copy without web/dist, so the wheel never carries the previous build inside itself.
        source = Path(scratch) / "src"
        shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
            ".git", ".venv", "node_modules", "build", "dist", "*.egg-info", "__pycache__", ".*cache", ".hypothesis"))
        # ...and without setup.py's hook building one into it (it would run this script again).
        pip("wheel", "-q", "--no-deps", "-w", out, source, env={**os.environ, "LLMCHAT_SKIP_WEB_BUILD": "1"})
    pip("download", "-q", "--no-deps", "--only-binary", ":all:", "-d", out, *RUNTIME_WHEELS)
    # CC=false makes the C extension fail to build; MarkupSafe then ships its pure-Python fallback, tagged any.
    pip("wheel", "-q", "--no-deps", "--no-binary", ":all:", "-w", out, MARKUPSAFE,
        env={**os.environ, "CC": "false"})
    wheels = sorted(out.glob("*.whl"))
    impure = [w.name for w in wheels if not w.name.endswith("-py3-none-any.whl")]
    if impure:
        sys.exit(f"build_web_dist: these wheels are not pure Python and cannot load in Pyodide: {impure}")
    return wheels


def add_bytecode(wheels: list[Path]) -> None:
    """Put each module's .pyc into its wheel, compiled by Pyodide's own interpreter under Node
    (tools/build/wheel_bytecode.py), so a page imports them without compiling."""
    folder = wheels[0].parent
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "config.json"
        config.write_text(json.dumps({"dist": str(PYODIDE_NPM), "packages": [], "cwd": "/wheels",
                                      "mounts": {"/tools": str(ROOT / "tools" / "build"), "/wheels": str(folder)},
                                      "argv": ["/tools/wheel_bytecode.py", *(w.name for w in wheels)]}))
        run("node", ROOT / "tools" / "build" / "pyodide_run.mjs", config)


def jspi_node() -> str | None:
    """A Node whose WebAssembly has JS promise integration, as Chromium's has (a snapshot made without it fails in
    the page): the one on PATH where it has it, else the one npm installs for this platform (package.json's
    optionalDependencies)."""
    found = [shutil.which("node"), *map(str, sorted(ROOT.glob("node_modules/node-*/bin/node")))]
    for node in filter(None, found):
        probe = subprocess.run([node, "-e", "process.exit('Suspending' in WebAssembly ? 0 : 1)"], capture_output=True)
        if probe.returncode == 0:
            return node
    return None


def add_snapshot(target: Path) -> None:
    node = jspi_node()
    if node is None:
        print("build_web_dist: warning: no Node with WebAssembly JSPI here (npm offers none for this platform and "
              "the node on PATH lacks it), so web/dist serves no Python snapshot: a page's first visit boots Python "
              "(seconds longer) and says so in engine.info.python", file=sys.stderr)
        return
    run(node, ROOT / "tools" / "build" / "python_snapshot.mjs", target)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(dist: Path) -> None:
    if not PYODIDE_NPM.is_dir():
        sys.exit("build_web_dist: node_modules/pyodide is missing; run `npm ci` first")
    target = dist / "pyodide"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in PYODIDE_FILES:
        shutil.copy2(PYODIDE_NPM / name, target / name)
    wheels = build_wheels(target)
    add_bytecode(wheels)
    lock = add_wheels(json.loads((PYODIDE_NPM / "pyodide-lock.json").read_text()), wheels)
    write_lock(lock, target / "pyodide-lock.json")
    for wheel in wheels:  # the lock must name exactly the bytes we serve
        entry = next(p for p in lock["packages"].values() if p["file_name"] == wheel.name)
        assert entry["sha256"] == sha256(wheel), wheel
    add_snapshot(target)
    # What the service worker precaches, and what a page can check before it trusts the folder.
    # `build` names this exact set of bytes: the service worker keeps one cache per build and swaps them whole.
    build = hashlib.sha256(b"".join(sha256(p).encode() for p in sorted(target.iterdir()))).hexdigest()[:16]
    manifest = {"build": build, "pyodide": json.loads((PYODIDE_NPM / "package.json").read_text())["version"],
                "python": lock["info"]["python"],
                "files": sorted(p.name for p in target.iterdir())}
    (dist / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"build_web_dist: {target} ready ({', '.join(w.name for w in wheels)})")


def download_test_wheels(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pip("download", "-q", "--no-deps", "--only-binary", ":all:", "-d", out, *TEST_WHEELS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "web" / "dist")
    parser.add_argument("--test-wheels", type=Path,
                        help="download pytest's pure wheels into this folder instead of building --dist")
    args = parser.parse_args()
    if args.test_wheels:
        download_test_wheels(args.test_wheels)
    else:
        build(args.dist)


if __name__ == "__main__":
    main()
