"""One engine for the tabs of an origin (web/engine-link.js): two pages of one browser share one worker, one
download and one copy of the model on the GPU; their replies are a private engine's greedy replies; when the page
that runs the engine closes, the other takes it over (from OPFS, no new download) and its conversation goes on.
Where Web Locks are missing, and with `shared: false` / shared="false", each page runs an engine of its own and
`engine.info` says why.

SwiftShader is slow: the SmolLM2 test model with a 256-token context, replies of three tokens."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from browser_server import WebServer

WEB = Path(__file__).resolve().parent.parent / "web"
MODEL = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
SYSTEM = {"role": "system", "content": "Be brief."}
USER_A, USER_B = {"role": "user", "content": "Capital of France?"}, {"role": "user", "content": "Name a color."}
# b2 continues b1 (its reply goes where "b1" stands).
CONVERSATIONS = {"a1": [SYSTEM, USER_A], "b1": [SYSTEM, USER_B],
                 "b2": [SYSTEM, USER_B, "b1", {"role": "user", "content": "And another?"}]}

# The JS API with a few helpers the test calls: `ask` streams a greedy reply and keeps its token ids.
API_PAGE = """<!doctype html><script type="module">
  import { createEngine } from "/llm-chat.js";
  const shared = new URLSearchParams(location.search).get("shared") !== "false";
  window.engine = await createEngine({ model: "%s", context: 256, shared });
  window.ask = async (messages, max_tokens) => {
    const tokens = [];
    let text = "";
    let finish = null;
    for await (const chunk of await engine.chat.completions.create({ messages, max_tokens, stream: true })) {
      if (chunk.llmchat?.token !== undefined) tokens.push(chunk.llmchat.token);
      text += chunk.choices[0].delta.content ?? "";
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    return { tokens, text, finish };
  };
  window.ready = true;
</script>""" % MODEL

ELEMENT_PAGE = """<!doctype html><script type="module" src="/llm-chat.js"></script>
<script>
  window.infos = [];
  document.addEventListener("llm-ready", (event) => window.infos.push(event.detail));
  document.addEventListener("llm-error", (event) => window.infos.push(event.detail));
</script>
<llm-chat model="%s" context-size="256" persist="false" preload %s></llm-chat>"""


@pytest.fixture(scope="module")
def server(smollm2_path: Path):
    with WebServer(WEB, smollm2_path.parent) as srv:
        srv.pages["/shared.html"] = API_PAGE
        srv.pages["/element.html"] = ELEMENT_PAGE % (MODEL, "")
        srv.pages["/element-private.html"] = ELEMENT_PAGE % (MODEL, 'shared="false"')
        srv.size = (smollm2_path.parent / Path(MODEL).name).stat().st_size
        yield srv


def open_api(context, server, query: str = ""):
    page = context.new_page()
    page.goto(f"{server.url}/shared.html{query}")
    page.wait_for_function("window.ready")
    return page


def start(page, messages: list[dict], name: str) -> None:
    page.evaluate("([m, name]) => { ask(m, 3).then((r) => { window[name] = r; }, (e) => { window[name] = "
                  "{ error: e.code + ': ' + e.message }; }); }", [messages, name])


def result(page, name: str) -> dict:
    page.wait_for_function(f"window.{name}")
    out = page.evaluate(f"window.{name}")
    assert "error" not in out, out
    return out


@pytest.fixture(scope="module")
def native(smollm2_path):
    """The native engine's greedy replies (token ids) to the conversations below, asked in the same order."""
    from llmchat.api import LLM
    llm = LLM(str(smollm2_path), context=256)
    replies = {}
    for name, messages in CONVERSATIONS.items():
        messages = [*messages[:-2], {"role": "assistant", "content": replies[messages[-2]]["text"]}, messages[-1]] \
            if isinstance(messages[-2], str) else messages
        events = list(llm.chat(messages, max_tokens=3))
        replies[name] = {"tokens": [e.token for e in events if e.token is not None],
                         "text": "".join(e.text for e in events)}
    llm.device.close()
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
    assert lead["engine"] == follow["engine"]  # one worker, one model on the GPU: the follower runs no worker
    assert len(leader.workers) == 1 and follower.workers == []
    assert (server.log.model_bytes, len(server.log.model_requests())) == downloaded  # the second page: nothing

    # Both pages ask at once: the engine takes the requests in turn, and each page gets its own reply, the one the
    # native engine gives (greedy).
    start(leader, CONVERSATIONS["a1"], "a1")
    start(follower, CONVERSATIONS["b1"], "b1")
    a1, b1 = result(leader, "a1"), result(follower, "b1")
    assert a1["tokens"] == native["a1"]["tokens"] and b1["tokens"] == native["b1"]["tokens"], (a1, b1, native)
    assert len(a1["tokens"]) == len(b1["tokens"]) == 3

    # The page that runs the engine closes: the other takes it over, and its conversation goes on.
    leader.close()
    follower.wait_for_function("engine.info.leader")
    assert len(follower.workers) == 1
    b2_messages = [*CONVERSATIONS["b1"], {"role": "assistant", "content": b1["text"]}, CONVERSATIONS["b2"][-1]]
    start(follower, b2_messages, "b2")
    b2 = result(follower, "b2")
    assert b2["tokens"] == native["b2"]["tokens"] and len(b2["tokens"]) == 3, (b2, native["b2"])
    assert follower.evaluate("engine.info.engine") != lead["engine"]  # a new worker, from OPFS:
    assert (server.log.model_bytes, len(server.log.model_requests())) == downloaded  # still the one download


def test_without_web_locks_or_with_shared_false_each_page_runs_its_own_engine(server, context):
    """The element's view of it: llm-ready's detail is engine.info."""
    no_locks = context.new_page()
    no_locks.add_init_script("delete Navigator.prototype.locks;")
    no_locks.goto(f"{server.url}/element.html")
    no_locks.wait_for_function("window.infos.length")
    (info,) = no_locks.evaluate("window.infos")
    assert info.get("sharing") == "private", info
    assert "Web Locks" in info["sharingReason"] and len(no_locks.workers) == 1

    opted_out = context.new_page()
    opted_out.goto(f"{server.url}/element-private.html")
    opted_out.wait_for_function("window.infos.length")
    (other,) = opted_out.evaluate("window.infos")
    assert other.get("sharing") == "private", other
    assert "shared: false" in other["sharingReason"] and len(opted_out.workers) == 1
    assert other["engine"] != info["engine"], json.dumps([info, other])[:300]
