"""Hostile or broken model sources in the browser: the page hears what went wrong and what to do, and OPFS keeps
nothing half-written that a later visit would take for a model.

Two levels, to keep this file quick on SwiftShader:
- through the <llm-chat> element and the JS API (createEngine) for sources that fail before any weights load:
  an HTML page, a 404, a redirect loop. Both must show the same error: the element's status line plus its
  llm-error event, and the promise createEngine returns rejects with the same code.
- through ModelStore itself, in a module worker of its own (OPFS sync handles exist only in workers), for faults
  in the middle of a download: a stall, a full disk, two tabs at once. There the store's options (stall timeout,
  retries) can be small, and no Python runtime needs to boot.

The model files are small GGUFs from gguf_factory (the store never parses them; only their bytes matter).
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from browser_server import WebServer
from browser_util import RECORDER, WEB, events, open_profile
from gguf_factory import GGMLType, TensorSpec, write_gguf

SIZE_HINT = 3 << 20  # bigger than the store's first request (1 MiB), so faults can hit the download proper

# A worker that runs one ModelStore job and answers with what happened and what OPFS holds afterwards.
# Options may make the storage fail: failWriteAfter (bytes) makes the sync handle's writes throw
# QuotaExceededError past that many bytes, as Chromium's do when the origin's quota is spent.
STORE_WORKER = """
import { ModelStore } from "__ORIGIN__/model-store.js";
async function listing() {
  const root = await navigator.storage.getDirectory();
  const out = {};
  try {
    const dir = await root.getDirectoryHandle("llmchat-models");
    for await (const [name, handle] of dir.entries()) {
      const file = await handle.getFile();
      out[name] = name.endsWith(".json") ? JSON.parse(await file.text()) : file.size;
    }
  } catch {}
  return out;
}
self.onmessage = async ({ data }) => {
  if (data.failWriteAfter != null) {
    const create = FileSystemFileHandle.prototype.createSyncAccessHandle;
    FileSystemFileHandle.prototype.createSyncAccessHandle = async function (...args) {
      const handle = await create.apply(this, args);
      handle.isModel = this.name.endsWith(".gguf");
      return handle;
    };
    const write = FileSystemSyncAccessHandle.prototype.write;
    let budget = data.failWriteAfter;
    FileSystemSyncAccessHandle.prototype.write = function (buffer, options) {
      if (this.isModel) {
        if (budget < buffer.byteLength) throw new DOMException("quota exceeded", "QuotaExceededError");
        budget -= buffer.byteLength;
      }
      return write.call(this, buffer, options);
    };
  }
  let store = null;
  const result = {};
  try {
    store = await ModelStore.open(data.url, data.options);
    result.opened = performance.now();
    await store.download();
    result.ok = true;
  } catch (error) {
    result.ok = false;
    result.code = error.code;
    result.message = error.message;
  }
  if (store) Object.assign(result, { have: store.have, size: store.size, complete: store.complete,
                                     fromCache: store.fromCache, requests: store.requests, resumes: store.resumes });
  result.files = await listing();
  if (data.digest && store?.complete) {
    const file = await store.fileHandle.getFile();
    const digest = await crypto.subtle.digest("SHA-256", await file.arrayBuffer());
    result.sha256 = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  }
  self.postMessage(result);
};
"""

HARNESS = """<!doctype html><title>store</title><script>
window.runStore = (job) => new Promise((resolve) => {
  const source = %s.replaceAll("__ORIGIN__", location.origin);
  const worker = new Worker(URL.createObjectURL(new Blob([source], { type: "text/javascript" })), { type: "module" });
  worker.onmessage = ({ data }) => { worker.terminate(); resolve(data); };
  worker.onerror = (event) => resolve({ ok: false, code: "worker", message: event.message });
  worker.postMessage(job);
});
window.clearStore = async () => {
  const root = await navigator.storage.getDirectory();
  await root.removeEntry("llmchat-models", { recursive: true }).catch(() => {});
};
</script>""" % json.dumps(STORE_WORKER)

ELEMENT = """<!doctype html><title>hostile</title>
<script type="module" src="/llm-chat.js"></script>
<llm-chat model="%(model)s"></llm-chat>
<script type="module">
  import { createEngine } from "/engine.js";
  window.api = createEngine({ model: "%(model)s" }).then(
    () => ({ ok: true }), (error) => ({ ok: false, code: error.code, message: error.message }));
</script>"""


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    path = folder / "tiny.gguf"
    n = SIZE_HINT // 4
    write_gguf(path, tensors=[TensorSpec.random("blob.weight", GGMLType.F32, [n])])
    return path


@pytest.fixture(scope="module")
def server(model_file):
    with WebServer(WEB, model_file.parent) as srv:
        srv.pages["/store.html"] = HARNESS
        srv.pages["/models/page.gguf"] = "<!doctype html><title>Sign in</title><p>Please sign in to download."
        srv.redirects["/models/loop-a.gguf"] = "/models/loop-b.gguf"
        srv.redirects["/models/loop-b.gguf"] = "/models/loop-a.gguf"
        yield srv


@pytest.fixture(scope="module")
def page(browser_type, browser_type_launch_args, browser_context_args, tmp_path_factory, server):  # noqa: F811
    context = open_profile(browser_type, browser_type_launch_args, browser_context_args,
                           tmp_path_factory.mktemp("profile"), init_scripts=(RECORDER,))
    page = context.new_page()
    yield page
    context.close()


def run_store(page, server, job: dict) -> dict:
    page.goto(f"{server.url}/store.html")
    page.evaluate("clearStore()")
    return page.evaluate("(job) => runStore(job)", {"url": f"{server.url}/models/tiny.gguf", **job})


# --- through the element and the JS API ------------------------------------------------------------------------

@pytest.mark.parametrize("model, code, words", [
    ("/models/page.gguf", "not-a-model", ["web page", "HTTP 200", "text/html", "/models/page.gguf", "check the model URL"]),
    ("/models/missing.gguf", "not-found", ["HTTP 404", "/models/missing.gguf", "check the model URL"]),
    ("/models/loop-a.gguf", "network", ["/models/loop-a.gguf", "redirects in a loop", "check that the URL"]),
])
def test_a_bad_source_is_named_on_the_page_and_in_the_api(page, server, model, code, words):
    name = f"/hostile-{code}.html"
    server.pages[name] = ELEMENT % {"model": model}
    page.goto(f"{server.url}{name}")
    api = page.evaluate("window.api")  # awaits the promise
    assert not api["ok"] and api["code"] == code, api
    for word in words:
        assert word in api["message"], (word, api["message"])
    page.wait_for_function("window.__events.some(e => e[0] === 'llm-error')")
    error = events(page, "llm-error")[0]
    assert error["code"] == code and error["message"] == api["message"]
    status = page.locator("llm-chat .status")
    assert status.get_attribute("data-state") == "error" and api["message"] in status.inner_text()
    # Nothing was written for a URL that never gave a byte of a model.
    files = page.evaluate("""async () => { const out = [];
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("llmchat-models", {create: true});
      for await (const name of dir.keys()) out.push(name); return out; }""")
    assert files == [], files
    page.goto("about:blank")  # ends the workers (and the Python runtime one of them is booting)


# --- through ModelStore --------------------------------------------------------------------------------------------

def test_a_stalled_download_is_cut_and_resumed(page, server, model_file):
    """The server stops sending mid-body: the store gives up after stallMs of silence and asks again from the
    last byte it holds; with no retries left the partial download stays, marked incomplete, for the next visit."""
    size = model_file.stat().st_size
    data = model_file.read_bytes()
    server.faults.stall_model_at, server.faults.stall_seconds = 2_000_000, 4.0
    result = run_store(page, server, {"options": {"stallMs": 1000, "retries": 0, "backoffMs": 10}})
    assert not result["ok"] and result["code"] == "network", result
    assert "sent nothing for 1 s" in result["message"] and "resume" in result["message"]
    key = next(k for k in result["files"] if k.endswith(".gguf"))
    meta = result["files"][key.replace(".gguf", ".json")]
    assert result["files"][key] == result["have"] == 2_000_000 and meta["complete"] is False

    # The next visit resumes from there (a stall again, but retries now allowed) and ends with the right bytes.
    server.log.clear()
    server.faults.stall_model_at, server.faults.stall_seconds = 2_500_000, 4.0
    page.goto(f"{server.url}/store.html")
    again = page.evaluate("(job) => runStore(job)", {"url": f"{server.url}/models/tiny.gguf", "digest": True,
                                                       "options": {"stallMs": 1000, "retries": 2, "backoffMs": 10}})
    assert again["ok"] and again["complete"] and again["resumes"] >= 2, again
    assert again["sha256"] == hashlib.sha256(data).hexdigest()
    ranges = [r for _, r in server.log.model_requests()]
    assert "bytes=2000000-" in "".join(ranges) and "bytes=2500000-" in "".join(ranges), ranges
    assert size > 2_500_000


def test_full_storage_stops_with_a_message_and_keeps_what_was_written(page, server, model_file):
    """How the full disk is made: the worker's FileSystemSyncAccessHandle.write throws QuotaExceededError (what
    Chromium throws when the origin's quota is spent) once 1.5 MiB of model bytes were written."""
    result = run_store(page, server, {"failWriteAfter": 1_500_000,
                                      "options": {"stallMs": 5000, "retries": 3, "backoffMs": 10}})
    assert not result["ok"] and result["code"] == "quota", result
    message = result["message"]
    assert "not enough storage for the model" in message and "3.0 MiB" in message, message  # the sizes named
    assert "Delete stored models" in message and "what was downloaded is kept" in message, message
    assert result["requests"] <= 3  # a full disk is not retried as if it were the network
    key = next(k for k in result["files"] if k.endswith(".gguf"))
    meta = result["files"][key.replace(".gguf", ".json")]
    assert meta["complete"] is False and result["files"][key] == meta["have"] == result["have"] < result["size"]


def test_two_tabs_share_one_download(page, server, model_file):
    """Two pages of one origin load the same model at once: the second waits for the first one's download (a Web
    Lock per model) and then reads the finished file; nothing is downloaded twice and the bytes are the file's."""
    data = model_file.read_bytes()
    page.goto(f"{server.url}/store.html")
    page.evaluate("clearStore()")
    other = page.context.new_page()
    other.goto(f"{server.url}/store.html")
    server.log.clear()
    server.faults.stall_model_at, server.faults.stall_seconds = 1_500_000, 1.5  # keeps the first one busy
    job = {"url": f"{server.url}/models/tiny.gguf", "digest": True, "options": {"stallMs": 1000, "retries": 3, "backoffMs": 10}}
    page.evaluate("(job) => { window.first = runStore(job); }", job)
    # Its second request (the download after the probe) is made under the model's lock, which it then holds.
    deadline = time.monotonic() + 60
    while len(server.log.model_requests()) < 2:
        assert time.monotonic() < deadline, f"the first tab's download did not start: {server.log.model_requests()}"
        time.sleep(0.02)
    second = other.evaluate("(job) => runStore(job)", job)
    first = page.evaluate("window.first")
    other.close()
    digest = hashlib.sha256(data).hexdigest()
    assert first["ok"] and second["ok"], (first, second)
    assert first["sha256"] == second["sha256"] == digest
    assert second["fromCache"] and second["requests"] == 0, second


def test_a_tab_closed_mid_download_resumes_on_the_next_visit(page, server, model_file):
    """The tab goes away while the body is arriving (its worker dies with it, the sync handle never closed by us):
    the next visit finds the bytes already stored and asks only for the rest."""
    page.goto(f"{server.url}/store.html")
    page.evaluate("clearStore()")
    doomed = page.context.new_page()
    doomed.goto(f"{server.url}/store.html")
    server.faults.stall_model_at, server.faults.stall_seconds = 2_000_000, 6.0  # the body stops here, held open
    job = {"url": f"{server.url}/models/tiny.gguf", "digest": True,
           "options": {"stallMs": 20_000, "retries": 3, "backoffMs": 10}}
    doomed.evaluate("(job) => { runStore(job); }", job)
    page.wait_for_function("() => new Promise((r) => setTimeout(() => r(true), 1500))")
    doomed.close()
    server.log.clear()
    again = page.evaluate("(job) => runStore(job)", job)
    assert again["ok"] and again["resumes"] == 1, again
    assert again["sha256"] == hashlib.sha256(model_file.read_bytes()).hexdigest()
    starts = [int(r.split("=")[1].split("-")[0]) for _, r in server.log.model_requests() if r]
    assert starts == [0, 2_000_000], starts  # the first megabyte, then the rest after the stored bytes
