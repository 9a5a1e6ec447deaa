"""<llm-chat> with a Hugging Face reference as its model, in headless Chromium: the page resolves the reference
against a hub (here a local one on another origin, with its CDN on a third), downloads the file through the
redirect with Range requests, and runs it."""
from __future__ import annotations

from pathlib import Path

import pytest

from fake_hub import FakeHub
from test_browser import _launch, ask, events, server, wait_event  # noqa: F401 - fixtures


@pytest.fixture(scope="module")
def hub(smollm2_path: Path):
    hub = FakeHub()
    hub.add_repo("org/smol-GGUF", {"README.md": b"# smol\n", "SmolLM2-135M-Instruct.Q4_1.gguf": smollm2_path.read_bytes(),
                                   "SmolLM2-135M-Instruct.Q8_0.gguf": b"GGUF not this one"})
    yield hub
    hub.close()


def test_element_runs_a_short_hub_reference(launch_profile, server, hub, smollm2_path, tmp_path):  # noqa: F811
    server.pages["/hub.html"] = f"""<!doctype html><script type="module" src="/llm-chat.js"></script>
        <llm-chat model="org/smol-GGUF:q4_1" hub-endpoint="{hub.url}"></llm-chat>"""
    context = _launch(launch_profile, tmp_path / "profile")
    page = context.new_page()
    page.goto(f"{server.url}/hub.html")
    ready = wait_event(page, "llm-ready")
    assert ready["arch"] == "llama" and ready["layers"] == 30
    assert not ready["fromCache"] and ready["requests"] >= 2
    listing = [r.path for r in hub.log("hub", "GET") if r.path.startswith("/api/")]
    assert listing == ["/api/models/org/smol-GGUF/revision/main"]
    resolved = [r.path for r in hub.log("hub") if "/resolve/" in r.path]
    assert resolved and set(resolved) == {"/org/smol-GGUF/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf"}
    assert any(r.range and r.range != "bytes=0-" for r in hub.log("cdn", "GET"))  # Range reads at the CDN
    tokens, done = ask(page, "Hi", max_tokens=2)  # the downloaded bytes run
    assert len(tokens) == 2 and done["finish_reason"] == "length"


def test_element_reports_a_reference_that_matches_nothing(launch_profile, server, hub, tmp_path):  # noqa: F811
    server.pages["/hub-missing.html"] = f"""<!doctype html><script type="module" src="/llm-chat.js"></script>
        <llm-chat model="hf.co/org/smol-GGUF:Q2_K" hub-endpoint="{hub.url}"></llm-chat>"""
    context = _launch(launch_profile, tmp_path / "profile")
    page = context.new_page()
    page.goto(f"{server.url}/hub-missing.html")
    page.wait_for_function("window.__events.some(e => e[0] === 'llm-error')")
    (error,) = events(page, "llm-error")
    assert error["code"] == "model-not-found"
    assert "no GGUF file for quantization Q2_K" in error["message"]
    assert "SmolLM2-135M-Instruct.Q4_1.gguf; SmolLM2-135M-Instruct.Q8_0.gguf" in error["message"]
