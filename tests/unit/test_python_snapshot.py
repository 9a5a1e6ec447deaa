"""The Python snapshot web/dist serves (tools/build/python_snapshot.mjs): a page's first visit restores it instead of
booting Python, so it must hold this build's llmchat, imported, and say so in its tag.

The browser tests restore it in a page and chat (test_browser.py); these check the file itself.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "build"))
from build_web_dist import jspi_node  # noqa: E402

DIST = ROOT / "web" / "dist" / "pyodide"
SNAPSHOT = DIST / "llmchat-python.snapshot.gz"


@pytest.fixture(scope="module")
def snapshot() -> bytes:
    if not SNAPSHOT.exists():
        if os.environ.get("LLMCHAT_REQUIRE_WEB") == "1":
            pytest.fail(f"{SNAPSHOT} is missing (make web)")
        pytest.skip(f"{SNAPSHOT} is missing (make web)")
    return gzip.decompress(SNAPSHOT.read_bytes())


def _wheels(lock: dict, name: str = "llmchat") -> list[dict]:
    """`name` and what it depends on, depth first, as the worker lists them (web/python.js requiredWheels)."""
    found: dict[str, dict] = {}

    def visit(n: str) -> None:
        if n not in found:
            found[n] = lock["packages"][n]
            for dependency in found[n]["depends"]:
                visit(dependency)
    visit(name)
    return list(found.values())


def test_its_tag_names_the_wheels_it_holds(snapshot):
    lock = json.loads((DIST / "pyodide-lock.json").read_text())
    digests = ",".join(w["sha256"] for w in _wheels(lock))
    assert snapshot[:32] == hashlib.sha256(digests.encode()).hexdigest()[:32].encode()
    assert [w["file_name"].split("-")[0] for w in _wheels(lock)] == ["llmchat", "jinja2", "markupsafe"]


def test_pyodide_restores_it_with_the_runtime_imported(snapshot, tmp_path):
    node = jspi_node()
    if node is None:
        pytest.skip("no Node with WebAssembly JSPI here (npm ci installs one on Linux)")
    (tmp_path / "snapshot").write_bytes(snapshot[32:])
    script = tmp_path / "restore.mjs"
    # Restored as the worker restores it (web/python.js, which grows the heap first: the next test says why).
    script.write_text(textwrap.dedent(f"""\
        import {{ readFileSync }} from "node:fs";
        import {{ restoreSnapshot }} from {json.dumps(str(ROOT / "web" / "python.js"))};
        const dist = {json.dumps(str(DIST) + "/")};
        const {{ loadPyodide }} = await import(dist + "pyodide.mjs");
        const py = await restoreSnapshot(loadPyodide, {{ indexURL: dist }},
          readFileSync({json.dumps(str(tmp_path / "snapshot"))}));
        console.log(py.runPython("import sys; ' '.join(sorted(m for m in sys.modules if m.startswith('llmchat')))"));
        """))
    done = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]  # Pyodide's error ends its minified source
    modules = done.stdout.split()
    # Imported before the snapshot was taken: a restore needs no import, only the files unpacked again.
    assert {"llmchat.browser.runtime", "llmchat.api", "llmchat.browser.device"} <= set(modules), modules


def test_a_snapshot_of_a_heap_grown_past_pyodides_initial_one_restores(tmp_path):
    """Pyodide's own restore keeps the heap at the module's initial size (pyodide/pyodide#6254), so a snapshot of a
    boot that grew it failed to restore: web/python.js restoreSnapshot grows the heap first, as the worker restores."""
    node = jspi_node()
    if node is None:
        pytest.skip("no Node with WebAssembly JSPI here (npm ci installs one on Linux)")
    if not (DIST / "pyodide.mjs").exists():
        pytest.skip(f"{DIST} is not built (make web)")
    script = tmp_path / "grown.mjs"
    script.write_text(textwrap.dedent(f"""\
        import {{ restoreSnapshot }} from {json.dumps(str(ROOT / "web" / "python.js"))};
        const options = {{ indexURL: {json.dumps(str(DIST) + "/")}, stdout: () => {{}} }};
        const {{ loadPyodide }} = await import(options.indexURL + "pyodide.mjs");
        const started = (await loadPyodide(options))._module.HEAP8.length;
        const py = await loadPyodide({{ ...options, _makeSnapshot: true }});
        py.runPython("kept = bytearray(range(256)) * (160 << 10)");  // 40 MiB, alive in the snapshot
        const snapshot = py.makeMemorySnapshot();
        const restored = await restoreSnapshot(loadPyodide, options, snapshot);
        console.log(started, snapshot.length, restored.runPython("f'{{len(kept)}} {{kept[-1]}} {{sum(kept[:256])}}'"));
        """))
    done = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]  # Pyodide's error ends its minified source
    started, size, length, last, first_sum = map(int, done.stdout.split())
    assert size > started  # larger than a booted heap, so larger than the heap a restore starts with
    assert (length, last, first_sum) == (40 << 20, 255, sum(range(256)))
