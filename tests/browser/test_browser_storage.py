"""Model storage a page can manage, in headless Chromium: listModels/hasModel/deleteModel/storageEstimate, a full
storage quota (before and during a download), and split GGUF models (gguf-split shards) that download, resume and
load in the browser as one model.

The models are small random ones written here (a split one by the gguf package's own split writer), so that each
test downloads megabytes, not the 100 MB SmolLM2. Pages are served without the service worker, so the origin's
storage holds only what the model store writes.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from browser_server import WebServer
from browser_util import generate_script, native_greedy
from test_browser import WEB, _launch, events, shots  # noqa: F401 (fixtures)

SPLIT = "tinysplit-00001-of-00003.gguf"
PROMPT = "hello there"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import gguf
    from model_factory import write_model
    folder = tmp_path_factory.mktemp("models")
    plain = gguf.GGUFWriter

    class SplitWriter(plain):  # gguf-split's layout, written by the gguf package: 8 tensors per shard
        def __init__(self, path, arch, *args, **kwargs):
            super().__init__(path, arch, *args, split_max_tensors=8, **kwargs)

    gguf.GGUFWriter = SplitWriter
    try:
        write_model(folder / "tinysplit.gguf", n_layer=2, n_embd=64, n_head=4, n_kv_head=2, seed=5, tied=False)
    finally:
        gguf.GGUFWriter = plain
    write_model(folder / "tiny.gguf", n_layer=2, n_embd=64, n_head=4, n_kv_head=2, seed=3)
    write_model(folder / "big.gguf", n_layer=3, n_embd=512, n_head=4, n_kv_head=2, n_ff=1536, seed=6)  # ~10 MB
    return folder


@pytest.fixture(scope="module")
def site(models: Path):
    with WebServer(WEB, models) as srv:
        yield srv


API = """<!doctype html><script type="module">
  import * as api from "/llm-chat.js";
  window.api = api;
%s
  window.opfs = async () => {
    const root = await navigator.storage.getDirectory();
    let dir;
    try { dir = await root.getDirectoryHandle("llmchat-models"); } catch { return []; }
    const names = [];
    for await (const name of dir.keys()) names.push(name);
    return names.sort();
  };
  window.apiReady = true;
</script>""" % generate_script(PROMPT)


def api_page(context, site):
    site.pages["/api.html"] = API
    page = context.new_page()
    page.goto(f"{site.url}/api.html")
    page.wait_for_function("window.apiReady")
    return page


def test_list_has_delete_and_estimate_without_an_engine(launch_profile, site, models, tmp_path):
    tiny = models / "tiny.gguf"
    sha = hashlib.sha256(tiny.read_bytes()).hexdigest()
    url = f"{site.url}/models/tiny.gguf"
    context = _launch(launch_profile, tmp_path / "profile")
    page = api_page(context, site)
    assert page.evaluate("api.listModels()") == []
    assert page.evaluate("api.hasModel('/models/tiny.gguf')") is False
    page.evaluate("generate('/models/tiny.gguf', { integrity: 'sha256:%s' })" % sha)

    page.reload()  # a fresh page: the API reads the store without starting an engine or a worker
    page.wait_for_function("window.apiReady")
    listed = page.evaluate("api.listModels()")
    assert page.workers == []
    size = tiny.stat().st_size
    assert len(listed) == 1
    entry = listed[0]
    assert entry["url"] == url and entry["size"] == entry["stored"] == size
    assert entry["complete"] and not entry["partial"] and entry["sha256"] == sha
    assert entry["files"] == [url] and entry["date"].endswith("Z")
    assert page.evaluate("api.hasModel('/models/tiny.gguf')") is True
    assert page.evaluate("api.hasModel('/models/other.gguf')") is False
    estimate = page.evaluate("api.storageEstimate()")
    assert estimate["models"] == size and estimate["usage"] >= size
    assert estimate["quota"] > 0 and estimate["free"] == estimate["quota"] - estimate["usage"]

    assert page.evaluate("api.deleteModel('/models/tiny.gguf')") == size
    assert page.evaluate("api.listModels()") == []
    assert page.evaluate("api.hasModel('/models/tiny.gguf')") is False
    assert page.evaluate("opfs()") == []  # bytes and metadata, nothing left
    assert page.evaluate("api.storageEstimate()")["models"] == 0
    assert page.evaluate("api.deleteModel('/models/tiny.gguf')") == 0  # already gone: nothing to do


def test_a_split_model_downloads_resumes_and_loads_as_one(launch_profile, site, models, tmp_path):
    want = native_greedy(models / SPLIT, PROMPT, 4)
    shards = sorted(p.name for p in models.glob("tinysplit-*.gguf"))
    assert len(shards) == 3
    context = _launch(launch_profile, tmp_path / "profile")
    page = api_page(context, site)
    site.log.clear()
    site.faults.drop_model_at = 30_000  # the first request that crosses byte 30,000 of a file is cut there
    result = page.evaluate(f"generate('/models/{SPLIT}')")
    assert site.faults.drop_model_at is None  # the fault fired
    assert result["ids"] == want
    info = result["info"]
    assert info["files"] == 3 and not info["fromCache"]
    requested = {path.rsplit("/", 1)[-1] for path, _ in site.log.model_requests()}
    assert requested == set(shards)

    listed = page.evaluate("api.listModels()")
    assert [m["url"] for m in listed] == [f"{site.url}/models/{SPLIT}"]
    entry = listed[0]
    assert entry["complete"] and entry["files"] == [f"{site.url}/models/{name}" for name in shards]
    assert entry["size"] == entry["stored"] == sum((models / n).stat().st_size for n in shards)
    assert page.evaluate(f"api.hasModel('/models/{shards[1]}')") is True

    site.log.clear()  # a second load finds every shard in OPFS: no request at all
    again = page.evaluate(f"generate('/models/{SPLIT}')")
    assert again["ids"] == want and again["info"]["fromCache"] and again["info"]["requests"] == 0
    assert site.log.model_requests() == []

    # Deleting through any shard's URL removes the whole model.
    assert page.evaluate(f"api.deleteModel('/models/{shards[2]}')") == entry["size"]
    assert page.evaluate("api.listModels()") == [] and page.evaluate("opfs()") == []


def test_a_split_model_with_a_missing_shard_names_it(launch_profile, models, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("tinysplit-00001-of-00003.gguf", "tinysplit-00003-of-00003.gguf"):
        (folder / name).write_bytes((models / name).read_bytes())
    with WebServer(WEB, folder) as srv:
        context = _launch(launch_profile, tmp_path / "profile")
        try:
            page = api_page(context, srv)
            error = page.evaluate(f"generate('/models/{SPLIT}').then(() => null, (e) => ({{ code: e.code, "
                                  "message: e.message }))")
            assert error and "shard 2 of 3" in error["message"], error
        finally:
            context.close()


QUOTA_PAGE = """<!doctype html><script type="module" src="/llm-chat.js"></script>
<llm-chat model="/models/big.gguf" persist="false"></llm-chat>"""


def set_quota(context, page, origin: str, size: int | None) -> None:
    cdp = context.new_cdp_session(page)
    cdp.send("Storage.overrideQuotaForOrigin", {"origin": origin, **({"quotaSize": size} if size else {})})


def test_storage_filling_up_during_a_download_leaves_a_partial_that_can_be_deleted(launch_profile, site, models,
                                                                                   tmp_path, shots):
    size = (models / "big.gguf").stat().st_size
    context = _launch(launch_profile, tmp_path / "profile")
    page = context.new_page()
    site.pages["/quota.html"] = QUOTA_PAGE
    # The download pauses 4 MiB in while the quota is lowered: long enough for a loaded machine to lower it before
    # the download resumes (3 s was not, once, and the model was then stored whole).
    site.faults.stall_model_at = 4 << 20
    site.faults.stall_seconds = 15
    page.goto(f"{site.url}/quota.html")
    page.wait_for_function("window.__events.some(e => e[0] === 'llm-progress' && e[1].phase === 'download' && "
                           "e[1].loaded >= 3 * 2 ** 20)")
    set_quota(context, page, site.url, 2 << 20)
    page.wait_for_function("window.__events.some(e => e[0] === 'llm-error')")
    error = events(page, "llm-error")[0]
    assert error["code"] == "quota", error
    # Chromium enforces the lowered quota on writes but its estimate() still reports the profile's 10 GiB, so
    # the check made before the download (from the estimate) let it start, and the write is what failed.
    assert f"it is {size / 2 ** 20:.1f} MiB" in error["message"] and "still to download" in error["message"]
    assert "resumes" in error["message"]
    page.wait_for_selector("llm-chat .storage:not([hidden]) .delete-model")
    page.screenshot(path=shots / "storage-full.png")
    listed = page.evaluate("import('/llm-chat.js').then((api) => api.listModels())")
    assert len(listed) == 1 and listed[0]["partial"] and not listed[0]["complete"]
    assert 0 < listed[0]["stored"] < size and listed[0]["size"] == size
    assert "partial download" in page.locator("llm-chat .storage").inner_text()

    page.locator("llm-chat .delete-model").click()  # the element's own Delete button
    page.wait_for_function("""() => import('/llm-chat.js').then((api) => api.listModels())
                              .then((list) => list.length === 0)""")
    page.wait_for_function("document.querySelector('llm-chat').shadowRoot.querySelector('.storage ul')"
                           "?.textContent === 'None.'")
    set_quota(context, page, site.url, None)  # space again: "Try again" downloads and loads the model
    errors = len(events(page, "llm-error"))
    page.locator("llm-chat .retry").click()
    page.wait_for_function("n => window.__events.some(e => e[0] === 'llm-ready') || "
                           "window.__events.filter(e => e[0] === 'llm-error').length > n", arg=errors)
    assert len(events(page, "llm-error")) == errors, events(page, "llm-error")
    assert not events(page, "llm-ready")[0]["fromCache"]
    assert page.locator("llm-chat .storage").is_hidden()

