"""One engine for the tabs of an origin (web/engine-link.js): two pages of one browser share one worker, one
download and one copy of the model on the GPU; their replies, asked at the same time, are the native engine's greedy
replies; when the page that runs the engine closes, a reply it was writing for the other page ends with "handover",
the other page takes the engine over (from OPFS, no new download) and its conversation goes on. Where Web Locks are
missing, and with `shared: false` / shared="false", each page runs an engine of its own and says why.

SwiftShader is slow: the SmolLM2 test model with a 256-token context, replies of three tokens."""
from __future__ import annotations

from pathlib import Path

import pytest

from browser_server import WebServer
from browser_util import WEB

MODEL = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
SYSTEM = {"role": "system", "content": "Be brief."}
A1 = [SYSTEM, {"role": "user", "content": "Capital of France?"}]
B1 = [SYSTEM, {"role": "user", "content": "Name a color."}]


def second_turn(b1_reply: str) -> list[dict]:
    return [*B1, {"role": "assistant", "content": b1_reply}, {"role": "user", "content": "And another?"}]


# The JS API with a few helpers the test calls: `ask` streams a greedy reply (its conversation kept in OPFS under
# `key`, if given) and keeps its token ids, usage and what happened to the kept cache.
API_PAGE = """<!doctype html><script type="module">
  import { createEngine } from "/llm-chat.js";
  window.engine = await createEngine({ model: "%s", context: 256 });
  window.ask = async (messages, max_tokens, key) => {
    const tokens = [];
    let text = "";
    let usage = null;
    let kv = null;
    for await (const chunk of await engine.chat.completions.create({ messages, max_tokens, stream: true,
        stream_options: { include_usage: true }, ...(key ? { prompt_cache_key: key } : {}) })) {
      if (chunk.llmchat?.token !== undefined) tokens.push(chunk.llmchat.token);
      text += chunk.choices[0]?.delta.content ?? "";
      usage = chunk.usage ?? usage;
      kv = chunk.llmchat?.kv_cache ?? kv;
    }
    return { tokens, text, usage, kv };
  };
  window.ready = true;
</script>""" % MODEL

MISSING_PAGE = """<!doctype html><script type="module">
  import { createEngine } from "/llm-chat.js";
  const shared = new URLSearchParams(location.search).get("shared") !== "false";
  const engine = await createEngine({ model: "/models/missing.gguf", shared, preload: true });
  const code = await engine.ready.then(() => "loaded", (error) => error.code);
  window.done = { code, sharing: engine.sharing, reason: engine.sharingReason };
</script>"""

ELEMENT_PAGE = """<!doctype html><script type="module" src="/llm-chat.js"></script>
<llm-chat model="/models/missing.gguf" persist="false" preload shared="false"></llm-chat>
<script>
  document.addEventListener("llm-error", (event) => {
    const { engine } = event.target;
    window.done = { code: event.detail.code, sharing: engine.sharing, reason: engine.sharingReason };
  });
</script>"""


@pytest.fixture(scope="module")
def server(smollm2_path: Path):
    with WebServer(WEB, smollm2_path.parent) as srv:
        srv.pages["/shared.html"] = API_PAGE
        srv.pages["/missing.html"] = MISSING_PAGE
        srv.pages["/element-missing.html"] = ELEMENT_PAGE
        srv.size = (smollm2_path.parent / Path(MODEL).name).stat().st_size
        yield srv


def open_api(context, server):
    page = context.new_page()
    page.goto(f"{server.url}/shared.html")
    page.wait_for_function("window.ready")
    return page


def start(page, messages: list[dict], name: str, key: str | None = None) -> None:
    page.evaluate("([m, name, key]) => { ask(m, 3, key).then((r) => { window[name] = r; }, (e) => { window[name] = "
                  "{ error: e.code + ': ' + e.message }; }); }", [messages, name, key])


def result(page, name: str) -> dict:
    page.wait_for_function(f"window.{name}")
    out = page.evaluate(f"window.{name}")
    assert "error" not in out, out
    return out


@pytest.fixture(scope="module")
def native(smollm2_path):
    """The native engine's greedy replies (token ids and text) to the pages' conversations, asked in the same order."""
    from llmchat.api import LLM
    llm = LLM(str(smollm2_path), context=256)

    def reply(messages):
        events = list(llm.chat(messages, max_tokens=3))
        return {"tokens": [e.token for e in events if e.token is not None], "text": "".join(e.text for e in events)}

    replies = {"a1": reply(A1), "b1": reply(B1)}
    replies["b2"] = reply(second_turn(replies["b1"]["text"]))
    llm.runtime.device.close()
    return replies


def test_two_pages_share_one_engine_and_hand_over(server, context, native):
    server.log.model_bytes = 0
    leader = open_api(context, server)
    downloaded = server.log.model_bytes, len(server.log.model_requests())
    assert downloaded[0] >= server.size  # the model and its header's first reads
    follower = open_api(context, server)
    lead, follow = leader.evaluate("engine.info"), follower.evaluate("engine.info")
    assert lead["sharing"] == follow["sharing"] == "leader-tab", (lead, follow)
    assert lead["leader"] and not follow["leader"]
    # One worker, one copy of the model on the GPU: the second page runs no worker, and hears the first one's.
    assert lead["engine"] == follow["engine"]
    assert len(leader.workers) == 1 and follower.workers == []
    assert (server.log.model_bytes, len(server.log.model_requests())) == downloaded  # the second page: nothing

    # Both pages ask at once: the engine takes the requests in turn, and each page gets its own reply, the one the
    # native engine gives (greedy).
    # The second page keeps its conversation's KV cache in OPFS (prompt_cache_key).
    start(leader, A1, "a1")
    start(follower, B1, "b1", key="b")
    a1, b1 = result(leader, "a1"), result(follower, "b1")
    assert a1["tokens"] == native["a1"]["tokens"] and b1["tokens"] == native["b1"]["tokens"], (a1, b1, native)
    assert len(a1["tokens"]) == len(b1["tokens"]) == 3
    assert a1["kv"] is None and b1["kv"]["saved"] == b1["usage"]["prompt_tokens"] + 2, b1  # the last token: not fed

    # The page that runs the engine closes while the other's reply streams: that reply ends with "handover"; the
    # other page takes the engine over, and its conversation goes on.
    follower.evaluate("""() => { (async () => {
      const stream = await engine.completions.create({ prompt: "Once upon a time", max_tokens: 64, ignore_eos: true,
                                                      stream: true });
      try {
        for await (const chunk of stream) window.streaming = true;
        window.cut = "finished";
      } catch (error) {
        window.cut = error.code;
      }
    })(); }""")
    follower.wait_for_function("window.streaming")
    leader.close()
    follower.wait_for_function("window.cut")
    assert follower.evaluate("window.cut") == "handover"
    follower.wait_for_function("engine.info.leader")
    assert len(follower.workers) == 1
    start(follower, second_turn(b1["text"]), "b2", key="b")
    b2 = result(follower, "b2")
    assert b2["tokens"] == native["b2"]["tokens"] and len(b2["tokens"]) == 3, (b2, native["b2"])
    # The new engine read the conversation back from OPFS rather than computing it again.
    cached = b2["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert b2["kv"]["restored"] == b1["kv"]["saved"] and cached >= b1["usage"]["prompt_tokens"], b2
    assert follower.evaluate("engine.info.engine") != lead["engine"]  # a new worker, the model from OPFS:
    assert (server.log.model_bytes, len(server.log.model_requests())) == downloaded  # still the one download


def test_without_web_locks_or_with_shared_false_each_page_runs_its_own_engine(server, context):
    """Which engine a page gets is settled before its model loads, so a model that is not there keeps this quick:
    each page below runs a worker of its own (a page that shares an engine runs none, as above)."""
    pages = {"no-locks": "/missing.html", "opted-out": "/missing.html?shared=false",
             "opted-out-too": "/missing.html?shared=false", "element": "/element-missing.html"}
    seen = {}
    for name, path in pages.items():
        page = context.new_page()
        if name == "no-locks":
            page.add_init_script("delete Navigator.prototype.locks;")
        page.goto(f"{server.url}{path}")
        page.wait_for_function("window.done")
        seen[name] = page.evaluate("window.done")
        assert seen[name]["code"] == "not-found" and len(page.workers) == 1, (name, seen[name])
        if name == "opted-out":
            kept = page  # open beside the next page: two pages opted out, two workers at once
            continue
        page.close()  # a worker still starting Python would slow the next pages
        if name == "opted-out-too":
            assert len(kept.workers) == 1
            kept.close()
    assert seen["no-locks"]["sharing"] == "private" and "Web Locks" in seen["no-locks"]["reason"], seen
    for name in ("opted-out", "opted-out-too", "element"):
        assert seen[name]["sharing"] == "private" and "shared: false" in seen[name]["reason"], seen
