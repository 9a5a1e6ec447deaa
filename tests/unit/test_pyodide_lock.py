"""tools/build/pyodide_lock.py: the web build's lock file, written with the project's own interpreter.

Built here from web/dist's wheels and Pyodide's own lock (node_modules/pyodide), it must be the file pages load
(web/dist was built by the same code: the same bytes), Pyodide must install llmchat from it under Node, each entry
must name the sha256 of the wheel served, and pyodide-build (Python >= 3.12; `make test` installs it) must write the
same bytes.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "build"))
import pyodide_lock  # noqa: E402
import wheel_bytecode  # noqa: E402

DIST = ROOT / "web" / "dist" / "pyodide"
PYODIDE_LOCK = ROOT / "node_modules" / "pyodide" / "pyodide-lock.json"


def _require(path: Path) -> None:
    if not path.exists():
        if os.environ.get("LLMCHAT_REQUIRE_WEB") == "1":
            pytest.fail(f"{path} is missing (make web)")
        pytest.skip(f"{path} is missing (make web)")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A copy of web/dist/pyodide whose lock file this module wrote."""
    _require(DIST / "pyodide-lock.json")
    _require(PYODIDE_LOCK)
    out = tmp_path_factory.mktemp("dist")
    for path in DIST.iterdir():
        if path.name != "pyodide-lock.json":
            os.symlink(path, out / path.name)
    lock = pyodide_lock.add_wheels(json.loads(PYODIDE_LOCK.read_text()), sorted(DIST.glob("*.whl")))
    pyodide_lock.write(lock, out / "pyodide-lock.json")
    return out


def test_entries_name_our_wheels_and_their_dependencies(built):
    lock = json.loads((built / "pyodide-lock.json").read_text())
    base = json.loads(PYODIDE_LOCK.read_text())
    entry = lock["packages"]["llmchat"]
    assert entry["imports"] == ["llmchat"] and entry["install_dir"] == "site"
    # wgpu, fastapi, uvicorn and huggingface_hub are marked not for emscripten; extras are not dependencies.
    assert entry["depends"] == ["jinja2"]
    assert lock["packages"]["jinja2"]["depends"] == ["markupsafe"]
    assert lock["packages"]["markupsafe"]["file_name"].endswith("-py3-none-any.whl")  # ours, not Pyodide's build
    assert set(lock["packages"]) == set(base["packages"]) | {"llmchat"} and lock["info"] == base["info"]


def test_the_same_bytes_as_the_served_lock(built):
    assert (built / "pyodide-lock.json").read_bytes() == (DIST / "pyodide-lock.json").read_bytes()


def test_pyodide_installs_from_it_under_node(built, tmp_path):
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    script = tmp_path / "probe.py"
    # Every module imported from our wheels comes with the bytecode the build compiled (tools/build/wheel_bytecode.py):
    # hash-based and unchecked (flags 1), for this interpreter (magic), of the very source beside it (hash).
    script.write_text(textwrap.dedent("""\
        import importlib.util, json, sys, jinja2, markupsafe, llmchat, llmchat.browser.runtime
        stale = []
        for name, m in list(sys.modules.items()):
            if name.split('.')[0] in ('llmchat', 'jinja2', 'markupsafe') and m.__spec__.origin:
                pyc = open(m.__spec__.cached, 'rb').read()
                source = open(m.__spec__.origin, 'rb').read()
                if (pyc[:4], pyc[4:8], pyc[8:16]) != (importlib.util.MAGIC_NUMBER, bytes([1, 0, 0, 0]),
                                                      importlib.util.source_hash(source)):
                    stale.append(name)
        print(json.dumps({'llmchat': llmchat.__version__, 'jinja2': jinja2.__version__,
                          'markupsafe': markupsafe.escape('<b>') == '&lt;b&gt;', 'stale': stale,
                          'modules': sum(n.startswith('llmchat.') for n in sys.modules) > 20}))
        """))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"dist": str(built), "mounts": {"/probe": str(tmp_path)}, "cwd": "/probe",
                                  "argv": ["probe.py"]}))
    done = subprocess.run(["node", str(ROOT / "tools" / "build" / "pyodide_run.mjs"), str(config)], capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"llmchat": "0.1.0", "jinja2": "3.1.6",
                                                                  "markupsafe": True, "stale": [], "modules": True}


def test_each_wheels_record_lists_its_files():
    """The bytecode added to the served wheels is listed in their RECORD with its hash and size, as installers
    expect, and every module has it."""
    for wheel in DIST.glob("*.whl"):
        with zipfile.ZipFile(wheel) as z:
            names = set(z.namelist())
            record = next(n for n in names if n.endswith(".dist-info/RECORD"))
            lines = [line for line in z.read(record).decode().splitlines() if line]
            assert {line.split(",")[0] for line in lines} == names, wheel.name
            for line in lines:
                name = line.split(",")[0]
                if name != record:
                    assert line == wheel_bytecode.record_line(name, z.read(name)), name
        modules = [n for n in names if n.endswith(".py") and ".dist-info/" not in n]
        compiled = [n for n in names if n.endswith(".pyc")]
        assert modules and len(compiled) == len(modules), wheel.name


def test_each_entry_names_the_bytes_served(built):
    """Browsers check these sha256 when they install (Pyodide under Node reads files and does not)."""
    import hashlib
    lock = json.loads((built / "pyodide-lock.json").read_text())
    for wheel in DIST.glob("*.whl"):
        entry = next(e for e in lock["packages"].values() if e["file_name"] == wheel.name)
        assert entry["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()


def test_pyodide_build_writes_the_same_file(built, tmp_path):
    """The cross-check against the reference tool: build/pyodide-tools, which `make test` installs with a Python
    >= 3.12, or PYODIDE_BUILD_CLI. A bare `pytest` without it skips; `make test` allows no such skip."""
    cli = Path(os.environ.get("PYODIDE_BUILD_CLI") or ROOT / "build" / "pyodide-tools" / "bin" / "pyodide")
    if not cli.exists():
        pytest.skip(f"pyodide-build is not installed at {cli}")
    out = tmp_path / "lock.json"
    subprocess.run([str(cli), "lockfile", "add-wheels", "--input", str(PYODIDE_LOCK), "--output", str(out),
                    "--base-path", str(DIST), *sorted(str(w) for w in DIST.glob("*.whl"))], check=True,
                   capture_output=True, timeout=300)
    assert out.read_bytes() == (built / "pyodide-lock.json").read_bytes()


def test_a_platform_wheel_and_a_missing_dependency_are_refused(tmp_path):
    platform = tmp_path / "x-1.0-cp311-cp311-linux_x86_64.whl"
    with pytest.raises(pyodide_lock.LockError, match="not a pure-Python wheel"):
        pyodide_lock.wheel_entry(platform, "3.14.2")
    wheel = tmp_path / "needy-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("needy/__init__.py", "")
        z.writestr("needy-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: Needy\nVersion: 1.0\n"
                   "Requires-Dist: no-such-package>=1\nRequires-Dist: numpy; extra == 'fast'\n"
                   "Requires-Dist: pywin32; sys_platform == 'win32'\n")
    assert pyodide_lock.wheel_entry(wheel, "3.14.2")["depends"] == ["no-such-package"]
    assert pyodide_lock.wheel_entry(wheel, "3.14.2")["imports"] == ["needy"]
    with pytest.raises(pyodide_lock.LockError, match="no-such-package"):
        pyodide_lock.add_wheels({"info": {"python": "3.14.2"}, "packages": {}}, [wheel])
