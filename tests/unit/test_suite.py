"""The suite's own rules: each folder of tests/ collects on its own (a test module never imports a test module of
another folder; what tests share lives in tests/support), every test has a time limit, and a child a test
interrupts hears the Ctrl-C even where the suite was started with SIGINT ignored (a background job)."""
from __future__ import annotations

import ast
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from cli_util import hears_ctrl_c

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_no_test_module_imports_one_from_another_folder():
    """`pytest tests/hostile` puts only tests/hostile (and tests/support) on the path: a test module of another
    folder imported from there fails at collection."""
    folder_of = {p.stem: p.parent for p in TESTS.rglob("test_*.py")}
    crossing = [f"{p.relative_to(TESTS)} imports {name}"
                for p in TESTS.rglob("test_*.py") for name in sorted(_imported_modules(p))
                if name in folder_of and folder_of[name] != p.parent]
    assert not crossing, crossing


def test_test_modules_have_names_of_their_own():
    """pytest imports test modules by their file name: two of one name in different folders cannot both run."""
    stems = sorted(p.stem for p in TESTS.rglob("test_*.py"))
    assert not {s for s in stems if stems.count(s) > 1}


def test_every_test_has_a_time_limit(tmp_path):
    """The limit is configured for the whole suite, and pytest-timeout enforces it: a test that outlives its limit
    fails and the run goes on."""
    limit = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["timeout"]
    assert 0 < float(limit) <= 1800
    (tmp_path / "test_hang.py").write_text("import time\n\ndef test_hang():\n    time.sleep(600)\n\n"
                                           "def test_after():\n    pass\n")
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
                          str(tmp_path), "-p", "no:cacheprovider", "-o", "timeout=2", "-q", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert time.monotonic() - start < 60
    assert run.returncode == 1 and "1 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    assert "Timeout" in run.stdout


def test_an_interrupted_child_hears_ctrl_c_when_the_suite_ignores_it():
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell starts a background job
    try:
        plain = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
        helped = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                                preexec_fn=hears_ctrl_c)
    finally:
        signal.signal(signal.SIGINT, ignored)
    assert plain.stdout.strip() == "False"  # what the child would inherit without the helper
    assert helped.stdout.strip() == "True"
