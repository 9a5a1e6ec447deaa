"""The core inside Pyodide: the GPU-free tests run under Node with the pinned npm `pyodide`, installed from web/dist.

`make test` builds web/dist (the wheels and the Pyodide lock file pages use) and pytest's pure wheels first, and sets
LLMCHAT_REQUIRE_WEB=1 so that a missing build fails here instead of skipping.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from test_pyodide_core import parity_fingerprint

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "web" / "dist" / "pyodide"
TEST_WHEELS = ROOT / "build" / "pyodide-test-wheels"
RUNNER = Path(__file__).parents[1] / "pyodide" / "run_pytest.mjs"
# Run inside Pyodide: everything of test_chat.py and test_hub_refs.py but the tests that start a subprocess (Pyodide
# has none).
INNER = ["tests/model/test_pyodide_core.py", "tests/model/test_chat.py", "tests/unit/test_hub_refs.py",
         "--deselect", "tests/model/test_chat.py::test_core_imports_without_jinja2",
         "--deselect", "tests/unit/test_hub_refs.py::test_core_works_without_huggingface_hub"]


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (DIST / "pyodide-lock.json").exists():
        return f"{DIST} is not built (make web)"
    if not list(TEST_WHEELS.glob("pytest-*.whl")):
        return f"pytest's wheels are not in {TEST_WHEELS} (make test downloads them)"
    return None


@pytest.fixture(scope="module")
def pyodide_run(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    problem = _missing()
    if problem:
        if os.environ.get("LLMCHAT_REQUIRE_WEB") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    out = tmp_path_factory.mktemp("pyodide")
    config = {
        "dist": str(DIST),
        "wheels": [str(w) for w in sorted(TEST_WHEELS.glob("*.whl"))],
        # The catalogue finds the model in $LLMCHAT_HOME/models, as it does natively.
        "mounts": {"/repo": str(ROOT), "/llmchat-home/models": str(smollm2_path.parent), "/out": str(out)},
        "env": {"LLMCHAT_HOME": "/llmchat-home", "LLMCHAT_PARITY_OUT": "/out/parity.json"},
        "cwd": "/repo",
        "args": [*INNER, "-q", "--junitxml=/out/junit.xml"],
    }
    (out / "config.json").write_text(json.dumps(config))
    result = subprocess.run(["node", str(RUNNER), str(out / "config.json")], capture_output=True, text=True,
                            timeout=180)
    return {"returncode": result.returncode, "output": result.stdout + result.stderr, "out": out}


def test_core_tests_pass_inside_pyodide(pyodide_run):
    output = pyodide_run["output"]
    assert pyodide_run["returncode"] == 0, output
    assert "on emscripten" in output, output  # it really ran in Pyodide
    suite = ET.parse(pyodide_run["out"] / "junit.xml").getroot().find("testsuite")
    counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts["failures"] == counts["errors"] == counts["skipped"] == 0, (counts, output)
    assert counts["tests"] >= 80, (counts, output)


def test_pyodide_and_native_agree(pyodide_run, smollm2_path):
    inside = json.loads((pyodide_run["out"] / "parity.json").read_text())
    assert inside == parity_fingerprint(smollm2_path)
