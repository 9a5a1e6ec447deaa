"""Every example in examples/ runs as its README says, so none goes stale.

The pages are served by a real `llmchat serve smollm2 --pages examples` (the page author's setup) and run in
headless Chromium (WebGPU on SwiftShader: replies are a few tokens long); the scripts run as subprocesses, the
openai one against that same server.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from server_util import running_server
from test_browser import RECORDER, events, wait_event

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SCRIPT_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def served(smollm2_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    # --web-dir: this tree's web folder (and its web/dist), wherever the installed package's llmchat.web points.
    with running_server("smollm2", ["--pages", str(EXAMPLES), "--web-dir", str(ROOT / "web"), "--ctx", "512",
                                    "--log-level", "info"], log=log) as base:
        yield base, log


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_every_example_is_linked_from_the_readmes():
    listed = (EXAMPLES / "README.md").read_text()
    files = sorted(p.name for p in EXAMPLES.iterdir() if p.suffix in (".html", ".py"))
    assert len(files) == 5 and all(name in listed for name in files), files
    assert "examples/" in (ROOT / "README.md").read_text()


def test_python_api_example_streams_two_turns(smollm2_path):
    out = _run("examples/python_api.py", str(smollm2_path), "-n", "10")
    lines = out.splitlines()
    assert lines[0] == "> What is the capital of France?" and "> And of Italy?" in lines
    replies = [line for line in lines if line and not line.startswith((">", "["))]
    # A newcomer copies this: the default model must answer both turns right (greedy, so always the same answer).
    assert len(replies) == 2 and "Paris" in replies[0] and "Rome" in replies[1], out
    assert sum(line.startswith("[") and "tokens]" in line for line in lines) == 2


def test_openai_client_example_against_llmchat_serve(served):
    base, _ = served
    out = _run("examples/openai_client.py", "--base-url", f"{base}/v1", "-n", "10")
    streamed, whole, usage = out.rstrip("\n").split("\n")
    assert streamed.startswith("smollm2 (streamed): ") and "Paris" in streamed, out
    assert whole.startswith("smollm2 (whole): ") and "Paris" in whole, out
    assert usage.startswith("[") and usage.endswith("tokens]"), out


READY = "!document.querySelector('llm-chat').shadowRoot.querySelector('textarea').disabled"


def _element_ready(page, max_tokens: int) -> str:
    """Waits until the page's <llm-chat> takes input; returns its status line."""
    page.eval_on_selector("llm-chat", f"el => el.setAttribute('max-tokens', '{max_tokens}')")
    page.wait_for_function(READY)
    return page.locator("llm-chat .status").inner_text()


def _element_reply(page, text: str) -> str:
    """Sends `text` through the element and returns the reply once it has ended."""
    page.locator("llm-chat textarea").fill(text)
    page.locator("llm-chat button.send").click()
    page.wait_for_function("document.querySelector('llm-chat').shadowRoot.querySelector('.assistant')?.textContent"
                           f" && {READY}")
    return page.locator("llm-chat .assistant").inner_text().strip()


def test_chat_element_page_answers_in_the_browser(served, page):
    base, _ = served
    page.goto(f"{base}/pages/chat-element.html")
    assert "Ready: " in _element_ready(page, max_tokens=3)
    assert _element_reply(page, "Capital of France?")


def test_js_api_page_streams_and_stops(served, page):
    base, log = served
    page.goto(f"{base}/pages/js-api.html?max_tokens=200")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('Ready')")
    page.fill("#input", "Write a long story about a dragon.")
    page.click("#send")
    # Streaming: text shows up before the reply is over, and Stop ends it early.
    page.wait_for_function("document.querySelector('.assistant').textContent.trim().length > 0")
    assert page.is_enabled("#stop")
    page.click("#stop")
    page.wait_for_function("/^(Done|Stopped|Error)/.test(document.getElementById('status').textContent)")
    assert page.inner_text("#status") == "Stopped"
    assert page.is_disabled("#stop") and page.is_enabled("#send")
    assert page.locator(".user").inner_text() == "Write a long story about a dragon."


def test_server_fallback_page_answers_through_the_server(served, page):
    """SwiftShader is a software adapter, so mode="auto" with an endpoint goes to the server: the reply comes
    from llmchat serve's /v1 (the model never downloads into the page)."""
    base, _ = served
    requests = []
    page.on("request", lambda r: requests.append((r.method, r.url)))
    page.goto(f"{base}/pages/server-fallback.html")
    assert "software" in _element_ready(page, max_tokens=4)
    assert _element_reply(page, "Capital of France?")
    assert ("POST", f"{base}/v1/chat/completions") in requests
    assert not [url for _, url in requests if "/models/" in url or "/dist/" in url]


def test_the_chat_page_without_webgpu_answers_through_its_server_and_marks_a_stopped_reply(served, page):
    """The chat page as `llmchat serve` serves it, in a browser without WebGPU: it hears of its server
    (server.json), answers through its /v1 and says so, in the header and the status line, with the catalogue's
    name for the model. A reply the visitor stops ends with finish_reason "abort" and stays marked after a reload;
    the conversation goes on through the server (which would refuse the mark as a message field)."""
    base, _ = served
    host = base.split("//")[1]
    page.add_init_script("delete Navigator.prototype.gpu;")
    page.add_init_script(RECORDER)
    requests = []
    page.on("request", lambda r: requests.append((r.method, r.url)))
    page.goto(f"{base}/")
    status = _element_ready(page, max_tokens=200)
    assert status.startswith(f"Ready: the model runs on the server at {host}, not in this browser"), status
    assert "no WebGPU" in status
    assert page.inner_text("#where-note") == (f"SmolLM2 135M Instruct runs on the server at {host}, not in this "
                                              "browser: your messages are sent to it.")
    page.locator("llm-chat textarea").fill("Tell me a long story about a dragon.")
    page.locator("llm-chat button.send").click()
    page.wait_for_function("window.__events.some(e => e[0] === 'llm-token' && e[1].text)")
    page.locator("llm-chat button.stop").click()
    done = wait_event(page, "llm-done")
    assert done["finish_reason"] == "abort" and done["text"], done
    note = page.locator("llm-chat .message.assistant.stopped .note")
    assert note.inner_text() == "Stopped before the end"

    page.reload()
    _element_ready(page, max_tokens=2)
    assert note.inner_text() == "Stopped before the end"  # restored with its mark
    assert page.eval_on_selector("llm-chat", "el => el.history.at(-1).stopped") is True
    page.locator("llm-chat textarea").fill("Thanks.")
    page.locator("llm-chat button.send").click()
    wait_event(page, "llm-done")
    assert page.locator("llm-chat .message.assistant").count() == 2
    assert sum(r == ("POST", f"{base}/v1/chat/completions") for r in requests) == 2
    # Nothing of the in-browser runtime came down: no model, no interpreter, no offline copy of them.
    assert not [url for _, url in requests if "/models/" in url or "/dist/pyodide/" in url], requests
    assert page.evaluate("navigator.serviceWorker.getRegistrations().then((r) => r.length)") == 0
