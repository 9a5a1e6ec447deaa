"""The installed package as a user's script meets it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_script_beside_a_folder_named_llmchat_imports_the_installed_package(tmp_path: Path) -> None:
    # The clone's folder is usually named llmchat: a script in the folder above it has that folder on sys.path,
    # where Python would take it for an empty namespace package.
    (tmp_path / "llmchat").symlink_to(ROOT, target_is_directory=True)
    script = tmp_path / "script.py"
    script.write_text("import llmchat\nfrom llmchat import load\nprint(llmchat.__file__)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert Path(run.stdout.strip()).name == "__init__.py"
