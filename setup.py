"""Wheels and sdists carry the browser runtime (web/dist: Pyodide, the wheels, their lock file), so that
`pip install` gives a `llmchat serve` whose chat page runs the model in the browser.

pyproject.toml holds the metadata; this only hooks the build. When web/dist is built (`make web`, or an sdist that
carries it) it is packaged as it is. Otherwise the build runs the web build (tools/build/build_web_dist.py: needs node
and npm, and npm's and PyPI's packages, from the network or their caches). Where that cannot run, the package is
built without it and says so; its `llmchat serve` then warns at start and its chat page answers through the
server's API. Editable installs never build it (`make web` does, for the working tree).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
DIST = ROOT / "web" / "dist"
# Set by tools/build/build_web_dist.py for the llmchat wheel it serves to pages: that one never carries web/dist.
SKIP = "LLMCHAT_SKIP_WEB_BUILD"


def _runtime_built() -> bool:
    return (DIST / "manifest.json").is_file() and (DIST / "pyodide" / "pyodide-lock.json").is_file()


def ensure_web_dist() -> None:
    if os.environ.get(SKIP) == "1" or _runtime_built():
        return
    why = _cannot_build()
    if why:
        print(f"llmchat: warning: building without the browser runtime (web/dist): {why}. `llmchat serve` will "
              "say so at start and its chat page will answer through the server's API.", file=sys.stderr)
        return
    # pip runs build backends with a PYTHONPATH that hides the interpreter's own site-packages (pip among them);
    # the web build calls pip, so it runs without that.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE")}
    if not (ROOT / "node_modules" / "pyodide").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=ROOT, check=True, env=env)
    subprocess.run([sys.executable, str(ROOT / "tools" / "build" / "build_web_dist.py")], cwd=ROOT, check=True, env=env)


def _cannot_build() -> str | None:
    if not (ROOT / "tools" / "build" / "build_web_dist.py").is_file():
        return "this source tree has neither web/dist nor tools/build/build_web_dist.py"
    if shutil.which("node") is None:
        return "node is not installed"
    if not (ROOT / "node_modules" / "pyodide").is_dir() and shutil.which("npm") is None:
        return "npm is not installed"
    return None


class BuildPy(build_py):
    def run(self) -> None:
        if not getattr(self, "editable_mode", False):
            ensure_web_dist()
            # package_data globs were expanded before this ran: pick up the files just built.
            self.data_files = self._get_data_files()
        super().run()


class SDist(sdist):
    def run(self) -> None:
        ensure_web_dist()
        super().run()


setup(cmdclass={"build_py": BuildPy, "sdist": SDist})
