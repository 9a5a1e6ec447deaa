"""The app's packaging: `briefcase dev --test` runs the app's own test suite (mobile/tests) inside the app, with
the toga-dummy backend, in this environment (the requirements are this checkout's, already installed)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BRIEFCASE = Path(sys.executable).with_name("briefcase")


@pytest.mark.gpu
def test_briefcase_dev_runs_the_apps_tests(tmp_path):
    if not BRIEFCASE.exists():
        pytest.fail(f"{BRIEFCASE} is missing: install the test extra (pip install -e '.[test]')")
    # Requirements come from this environment (requires=[]); the Debian packages Briefcase would check are only
    # needed to build PyGObject for the GTK backend, which toga-dummy replaces. debian={} drops pyproject.toml's
    # Debian sections, whose bookworm requirements (toga-gtk 0.5.4, PyGObject 3.50) Briefcase adds after the
    # overrides and would install here.
    env = {**os.environ, "TOGA_BACKEND": "toga_dummy", "TOGA_DUMMY_HOME": str(tmp_path)}
    logs = ROOT / "mobile" / "logs"
    had_logs = logs.exists()
    out = subprocess.run([str(BRIEFCASE), "dev", "--test", "--no-isolation", "--no-input", "-C", "requires=[]",
                          "-C", "test_requires=[]", "-C", "debian={}"], cwd=ROOT / "mobile", env=env,
                         capture_output=True, text=True, timeout=300)
    if not had_logs and logs.exists():
        shutil.rmtree(logs)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "4 passed" in out.stdout and "Test suite passed!" in out.stdout, out.stdout[-4000:]
