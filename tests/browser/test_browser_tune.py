"""The kernel tuner in the browser (headless Chromium, WebGPU on SwiftShader): off by default on this software
adapter and said so; `tune: true` measures on the first load, reports its choices in `engine.info.tuning`, keeps
them in OPFS, and the load after a reload takes them from there without timing anything.

The model is a small random one written here, so that the first (measuring) load compiles every candidate at
small shapes rather than SmolLM2's.
"""
from __future__ import annotations

import json

import pytest

from browser_server import WebServer
from browser_util import generate_script, native_greedy
from test_browser import WEB

PROMPT = "hello there"
TUNE_FILE = "llmchat-tune.json"  # llmchat.browser.runtime's TUNE_FILE
SWEEP_ROUNDS = 8  # as tests/model/test_tune.py's native sweep

PAGE = """<!doctype html><script type="module">
  import * as api from "/llm-chat.js";%s
  window.tuneAndSweep = async (model) => {
    const engine = await api.createEngine({ model, context: 128, shared: false, tune: true });
    const sweep = await engine.sweepKernels(%d);
    engine.terminate();
    return { tuning: engine.info.tuning, sweep };
  };
  window.tuneFile = async () => {
    const root = await navigator.storage.getDirectory();
    try {
      const file = await (await root.getFileHandle("%s")).getFile();
      return { text: await file.text(), modified: file.lastModified };
    } catch { return null; }
  };
  window.apiReady = true;
</script>""" % (generate_script(PROMPT), SWEEP_ROUNDS, TUNE_FILE)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    from model_factory import write_model
    folder = tmp_path_factory.mktemp("models")
    write_model(folder / "tiny.gguf", n_layer=2, n_embd=64, n_head=4, n_kv_head=2, seed=3)
    with WebServer(WEB, folder) as srv:
        srv.pages["/tune.html"] = PAGE
        yield srv


def open_page(context, site):
    page = context.new_page()
    page.goto(f"{site.url}/tune.html")
    page.wait_for_function("window.apiReady")
    return page


def test_tuning_is_kept_in_opfs_and_a_reload_uses_it(context, site):
    page = open_page(context, site)
    off = page.evaluate("generate('/models/tiny.gguf', { shared: false })")["info"]["tuning"]
    assert off["enabled"] is False and off["source"] == "off"  # a software adapter: the fixed table, said so
    assert off["choices"] and {c["by"] for c in off["choices"].values()} == {"default"}
    assert page.evaluate("tuneFile()") is None

    first = page.evaluate("generate('/models/tiny.gguf', { shared: false, tune: true })")
    tuning = first["info"]["tuning"]
    assert tuning["enabled"] and tuning["source"] == "measured", tuning
    families = {name.split("/")[0] for name in tuning["choices"]}
    assert {"matvec", "prefill", "attention"} <= families
    assert all(c["by"] in ("tuned", "default") and c["variant"] for c in tuning["choices"].values())
    stored = page.evaluate("tuneFile()")
    assert stored is not None
    assert tuning["cache"].startswith(f"opfs:{TUNE_FILE}#")
    key = tuning["cache"].split("#", 1)[1]
    entry = json.loads(stored["text"])[key]
    assert entry["choices"] == {name: c["variant"] for name, c in tuning["choices"].items()}
    assert entry["timed"]  # what was measured, kept beside the choices
    # Every candidate compiles in Chromium (Tint's uniformity analysis is stricter than naga's).
    refused = [t for t in entry["timed"] if "does not compile" in t.get("rejected", "")]
    assert not refused, refused

    page.reload()
    page.wait_for_function("window.apiReady")
    again = page.evaluate("generate('/models/tiny.gguf', { shared: false, tune: true })")
    cached = again["info"]["tuning"]
    assert cached["source"] == "cached" and cached["choices"] == tuning["choices"]
    assert page.evaluate("tuneFile()") == stored  # nothing measured, nothing written
    # Whatever variants were chosen, the model says the same as the fixed table's natively.
    assert again["ids"] == first["ids"] == native_greedy(site.models / "tiny.gguf", PROMPT, 4, tune=False)


def test_pick_matches_a_full_sweep(context, site):
    """What tests/model/test_tune.py checks natively, on SwiftShader: right after the tuner measured (a first load, empty
    OPFS), every candidate of every case timed SWEEP_ROUNDS more times in the same worker, interleaved, timed as
    the tuner times them; the variant running is within 15% of the fastest, or among the candidates whose timings
    overlap the fastest's (SwiftShader's round trips through the GPU process make equal kernels differ by 20-30%
    from run to run; a clearly slower pick still fails)."""
    page = open_page(context, site)
    result = page.evaluate("tuneAndSweep('/models/tiny.gguf')")
    tuning, sweep = result["tuning"], result["sweep"]
    assert tuning["source"] == "measured"
    assert set(sweep) == set(tuning["choices"]) and {"matvec/Q8_0", "prefill/Q8_0", "attention/decode"} <= set(sweep)
    for name, case in sweep.items():
        times = case["us_per_dispatch"]
        assert case["running"] == tuning["choices"][name]["variant"] in times
        assert len(times) > 1 and all(t > 0 for t in times.values()), (name, times)
        assert min(times, key=times.get) in case["ties"] and set(case["ties"]) <= set(times)
        assert times[case["running"]] <= 1.15 * min(times.values()) or case["running"] in case["ties"], (name, case)
