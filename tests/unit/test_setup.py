"""What `make demo` and `make test` set up, read from the real Makefile and tools/build/system-deps.sh without
installing anything: each sets up what it needs, the demo less than the tests."""
from __future__ import annotations

import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SYSTEM_DEPS = ROOT / "tools" / "build" / "system-deps.sh"


def _packages(set_name: str) -> list[str]:
    result = subprocess.run([str(SYSTEM_DEPS), "--list", set_name], capture_output=True, text=True, timeout=60,
                            check=True)
    return result.stdout.split()


def _dry_run(target: str) -> str:
    """The commands `make TARGET` would run with every stamp out of date (-B), printed, not run (-n)."""
    result = subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_demo_installs_the_vulkan_driver_and_not_the_test_suites_packages() -> None:
    demo, test = _packages("demo"), _packages("test")
    assert {"libvulkan1", "mesa-vulkan-drivers"} <= set(demo)
    assert {"g++", "cmake"} <= set(demo)  # the cpu engine's llama.cpp, compiled where there is no hardware GPU
    assert not {"chromium", "build-essential", "python3-dev", "libcairo2-dev", "gir1.2-gtk-3.0"} & set(demo)
    assert set(demo) < set(test) and "chromium" in test and "build-essential" in test


def test_a_missing_or_unknown_set_is_refused() -> None:
    for args in ([], ["--list"], ["everything"]):
        result = subprocess.run([str(SYSTEM_DEPS), *args], capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and "name a set, demo or test" in result.stderr


@pytest.mark.parametrize(("target", "wanted", "unwanted"), [
    ("demo", ["tools/build/system-deps.sh demo", "build_web_dist.py\n", "tools/build/cpu_engine.py"],
     ["--test-wheels", "system-deps.sh test"]),
    ("test", ["tools/build/system-deps.sh test", "build_web_dist.py\n", "build_web_dist.py --test-wheels ",
              "pip install -e '.[test,cpu]'", "CMAKE_ARGS="], []),
])
def test_each_target_sets_up_its_own_set(target: str, wanted: list[str], unwanted: list[str]) -> None:
    commands = _dry_run(target)
    for text in wanted:
        assert text in commands, (text, commands)
    for text in unwanted:
        assert text not in commands, (text, commands)


def test_make_demo_on_a_port_in_use_stops_before_the_model_is_pulled(tmp_path: Path) -> None:
    """The demo ends by serving on PORT: a port another program holds is one error line first, naming PORT, and
    nothing is pulled or run (set-up taken as done, -o; the recipe's $(BIN) pointed at this interpreter)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, run in (("llmchat", "-m llmchat"), ("python", "")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {run} "$@"\n')
        (bin_dir / name).chmod(0o755)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(["make", "-o", "system-deps-demo", "-o", ".venv/.installed", "-o", "web",
                                 f"BIN={bin_dir}", "MODEL=no-such-model", f"PORT={port}", "demo"], cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "llmchat pull" not in result.stdout, result.stdout  # the recipe stopped at its first line
    assert result.stderr.startswith(f"llmchat: error: port {port} on 127.0.0.1 is in use by another program "
                                    f"(another llmchat serve?): choose another with make demo PORT={port + 1}\n")
