"""Wheels carry the browser runtime, built by the build backend (setup.py's hook), and a server without it says so
and still chats.

`pip wheel .` from this tree must hold every file of web/dist; from a tree without web/dist the backend builds it
(node and npm's pyodide package present; node_modules is linked in so the test needs no network); and a server
whose runtime folder is empty warns at start, while its chat page answers through the server's own /v1.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from server_util import running_server

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "web" / "dist"
BUILD_TIMEOUT_S = 600


def _need(ok: bool, problem: str) -> None:
    if not ok:
        if os.environ.get("LLMCHAT_REQUIRE_WEB") == "1":
            pytest.fail(problem)
        pytest.skip(problem)


def _wheel(source: Path, out: Path) -> zipfile.ZipFile:
    env = {k: v for k, v in os.environ.items() if k != "LLMCHAT_SKIP_WEB_BUILD"}
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (wheel,) = out.glob("llmchat-*.whl")
    return zipfile.ZipFile(wheel)


def _runtime_files(wheel: zipfile.ZipFile) -> dict[str, bytes]:
    prefix = "llmchat/web/dist/"
    return {n[len(prefix):]: wheel.read(n) for n in wheel.namelist() if n.startswith(prefix)}


def test_a_wheel_built_from_the_repo_carries_web_dist(tmp_path):
    _need((DIST / "manifest.json").is_file(), "web/dist is not built (make web)")
    files = _runtime_files(_wheel(ROOT, tmp_path))
    manifest = json.loads((DIST / "manifest.json").read_text())
    assert files["manifest.json"] == (DIST / "manifest.json").read_bytes()
    for name in manifest["files"]:
        assert files[f"pyodide/{name}"] == (DIST / "pyodide" / name).read_bytes(), name


def test_the_build_backend_builds_web_dist_where_it_is_missing(tmp_path):
    _need(shutil.which("node") is not None and (ROOT / "node_modules" / "pyodide").is_dir(),
          "node or node_modules/pyodide is missing (make web runs npm ci)")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    source = tmp_path / "src"
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():  # a file deleted in the working tree but not yet in git is not copied
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    for name in ("setup.py", "MANIFEST.in", "tools/build/pyodide_lock.py"):  # also while these are uncommitted
        shutil.copy2(ROOT / name, source / name)
    os.symlink(ROOT / "node_modules", source / "node_modules")
    assert not (source / "web" / "dist").exists()
    files = _runtime_files(_wheel(source, tmp_path / "out"))
    manifest = json.loads(files["manifest.json"])
    assert sorted(n for n in files if n.startswith("pyodide/")) == sorted(f"pyodide/{n}" for n in manifest["files"])
    # The runtime's own llmchat wheel is the plain one: it does not carry a runtime inside itself.
    (inner,) = [n for n in manifest["files"] if n.startswith("llmchat-") and n.endswith(".whl")]
    (tmp_path / "inner.whl").write_bytes(files[f"pyodide/{inner}"])
    assert not [n for n in zipfile.ZipFile(tmp_path / "inner.whl").namelist() if "/dist/" in n]


def test_without_the_runtime_the_server_warns_and_its_page_chats_through_the_api(smollm2_path, tmp_path, page):
    empty = tmp_path / "no-runtime"
    empty.mkdir()
    log = tmp_path / "serve.log"
    # --web-dir: this tree's web folder, wherever the installed package's llmchat.web points.
    with running_server("smollm2", ["--ctx", "256", "--web-dir", str(ROOT / "web")],
                        env={"LLMCHAT_WEB_DIST": str(empty)}, log=log) as base:
        warnings = [line for line in log.read_text().splitlines() if "browser runtime is not installed" in line]
        assert len(warnings) == 1 and str(empty) in warnings[0] and "/v1" in warnings[0], log.read_text()
        requests = []
        page.on("request", lambda r: requests.append((r.method, r.url)))
        page.goto(f"{base}/")
        page.locator("#runtime-note").wait_for(state="visible")  # once the page's modules and its fetch are done
        assert "server's own API" in page.inner_text("#runtime-note")
        page.eval_on_selector("llm-chat", "el => el.setAttribute('max-tokens', '4')")
        page.wait_for_function("!document.querySelector('llm-chat').shadowRoot.querySelector('textarea').disabled")
        host = base.removeprefix("http://")
        assert f"the model runs on the server at {host}" in page.locator("llm-chat .status").inner_text()
        assert page.inner_text("#where-note").startswith(f"SmolLM2 135M Instruct runs on the server at {host}")
        page.locator("llm-chat textarea").fill("Capital of France?")
        page.locator("llm-chat button.send").click()
        page.wait_for_function(
            "document.querySelector('llm-chat').shadowRoot.querySelector('.assistant')?.textContent"
            " && !document.querySelector('llm-chat').shadowRoot.querySelector('textarea').disabled")
        assert page.locator("llm-chat .assistant").inner_text().strip()
        assert ("POST", f"{base}/v1/chat/completions") in requests
        assert not [url for _, url in requests if "/models/" in url]  # nothing downloads into the page
