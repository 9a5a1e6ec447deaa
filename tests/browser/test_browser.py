"""The browser runtime end to end in headless Chromium (WebGPU on SwiftShader): the <llm-chat> element, the JS API,
the offline PWA, and the model store's download behaviour.

SwiftShader runs a 135M model at about a token per second here, so every generation is a few tokens long and the
tests share one browser profile (the model is downloaded once, into its OPFS) where they can. Screenshots of each
state land in $LLMCHAT_SCREENSHOTS (default: the test's temporary folder).

Chromium is Debian's /usr/bin/chromium driven through pytest-playwright's fixtures (tests/conftest.py,
tests/support/browser_util.py; Playwright's own browser download is never used).
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import pytest

from browser_server import WebServer
from browser_util import BROWSER_TIMEOUT_MS, RECORDER, WEB, events, open_profile, read_opfs, wait_event, write_opfs

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "smollm2-135m-instruct-q4_1.json").read_text())
MODEL = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
SYSTEM = "Be brief."
QUESTION = "Capital of France?"
TIMEOUT = BROWSER_TIMEOUT_MS



@pytest.fixture(scope="module")
def server(smollm2_path: Path):
    with WebServer(WEB, smollm2_path.parent) as srv:
        yield srv


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("LLMCHAT_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def recorded(context):
    """pytest-playwright's fresh context (storage of its own, gone after the test) recording the element's events;
    for tests that need no model download kept across reloads."""
    context.add_init_script(RECORDER)
    return context


def _launch(launch_profile, profile: Path, *, webgpu: bool = True):
    return launch_profile(profile, webgpu=webgpu, init_scripts=(RECORDER,))


@pytest.fixture(scope="module")
def shared(browser_type, browser_type_launch_args, browser_context_args, tmp_path_factory):
    """One profile for the tests that reuse the downloaded model (first test downloads it into OPFS)."""
    context = open_profile(browser_type, browser_type_launch_args, browser_context_args,
                           tmp_path_factory.mktemp("profile"), init_scripts=(RECORDER,))
    page = context.new_page()
    page.console_messages = []
    page.on("console", lambda m: page.console_messages.append(f"{m.type}: {m.text}"))
    yield context, page
    context.close()


@pytest.fixture(scope="module")
def native(smollm2_path):
    """Greedy token ids of the native engine (wgpu-native) for the prompts the browser tests use."""
    from llmchat.api import LLM
    llm = LLM(str(smollm2_path), context=256)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    chat = [e.token for e in llm.generate(messages, max_tokens=3) if e.token is not None]
    prompt = GOLDEN["prompts"][0]["text"]
    raw = [e.token for e in llm.generate(prompt, max_tokens=3, ignore_eos=True) if e.token is not None]
    llm.runtime.device.close()
    return {"chat": chat, "raw": raw}




def ask(page, text: str, max_tokens: int) -> list[dict]:
    """Type a message into the element and press Send; returns the llm-token events of the reply and its done."""
    done_before = len(events(page, "llm-done"))
    tokens_before = len(events(page, "llm-token"))
    page.eval_on_selector("llm-chat", f"el => el.setAttribute('max-tokens', '{max_tokens}')")
    page.locator("llm-chat textarea").fill(text)
    page.locator("llm-chat button.send").click()
    done = wait_event(page, "llm-done", after=done_before)
    return events(page, "llm-token")[tokens_before:], done


def test_element_downloads_loads_and_answers_like_the_native_engine(shared, server, native, shots, smollm2_path):
    from llmchat.gguf.file import open_gguf
    with open_gguf(smollm2_path) as gguf:
        largest = max(t.nbytes for t in gguf.tensors.values())
    context, page = shared
    page.goto(f"{server.url}/index.html?model={MODEL}")
    page.eval_on_selector("llm-chat", f"el => el.setAttribute('system-prompt', {SYSTEM!r})")
    ready = wait_event(page, "llm-ready")
    page.screenshot(path=shots / "ready.png")
    assert ready["software"] and not ready["fromCache"]
    # An empty profile: Python starts from the snapshot web/dist serves (made by the build), kept for later loads.
    assert ready["python"] == {"start": "served", "snapshot": "saved"}
    assert "slow" in page.locator("llm-chat .warning").inner_text()  # SwiftShader is named as slow
    progress = events(page, "llm-progress")
    for phase in ("download", "load"):
        last = [p for p in progress if p["phase"] == phase][-1]
        assert last["loaded"] == last["total"] > 0 and last["fraction"] == 1, last
    downloads = [p["loaded"] for p in progress if p["phase"] == "download"]
    assert downloads == sorted(downloads) and len(downloads) > 2  # it really streamed, in order
    # The GPU holds what the plan counted: the file's rows, once rewritten into the split layout, are freed.
    held, peak = ready["gpu"]["buffer_bytes"], ready["gpu"]["buffer_peak"]
    assert ready["weights"] + ready["kv_cache"] <= held <= ready["total"] * 1.02, (held, ready["total"])
    # While it loads, Python records ahead of the uploads, but a weight's rows in the file's layout take GPU memory
    # only from their upload to their repack: one weight at a time beyond the plan.
    assert peak <= ready["total"] * 1.02 + largest, (peak, ready["total"], largest)
    print(f"GPU memory: {held} held, {peak} at the peak, plan {ready['total']}")

    # The catalogue's name for its file (general.name says "Smollm2 135M 8k Lc100K Mix1 Ep2"), and where it runs.
    assert ready["model"] == "SmolLM2 135M Instruct"
    assert page.locator("llm-chat .status").inner_text().startswith(
        "Ready: SmolLM2 135M Instruct, running in this browser on a software (CPU) WebGPU adapter")
    assert page.inner_text("#where-note").startswith("SmolLM2 135M Instruct runs in this browser")

    tokens, done = ask(page, QUESTION, max_tokens=3)
    page.screenshot(path=shots / "reply.png")
    assert [t["token"] for t in tokens] == native["chat"]
    assert done["finish_reason"] == "length"
    reply = page.locator("llm-chat .message.assistant").last.inner_text()
    assert done["text"] and done["text"] in reply

    # The second turn reuses the first one's KV cache: only the new tokens are computed.
    _, second = ask(page, "And of Italy?", max_tokens=2)
    usage = second["usage"]  # OpenAI's shape, and nothing beside it
    assert set(usage) == {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details"}, usage
    assert usage["prompt_tokens_details"]["cached_tokens"] >= usage["prompt_tokens"] // 2, usage


# The texts the element's status line shows, in order, from when this runs.
STATUS_RECORDER = """() => {
  const line = document.querySelector("llm-chat").shadowRoot.querySelector(".status [role=status]");
  window.__statuses = [line.textContent];
  new MutationObserver(() => window.__statuses.push(line.textContent))
    .observe(line, { childList: true, characterData: true, subtree: true });
}"""


def test_prompt_reading_shows_and_the_stop_button_ends_a_reply_marked_as_stopped(shared, server, shots):
    context, page = shared
    chat_page(page, server)
    done_before = len(events(page, "llm-done"))
    tokens_before = len(events(page, "llm-token"))
    progress_before = len(events(page, "llm-progress"))
    page.evaluate(STATUS_RECORDER)
    page.eval_on_selector("llm-chat", "el => el.setAttribute('max-tokens', '200')")
    # Long enough to take more than one prompt step (64 tokens each): the reading shows its progress.
    page.locator("llm-chat textarea").fill("Tell me a long story about " + ", ".join(
        f"a dragon called {name}" for name in ("Ash", "Birch", "Cedar", "Elm", "Fir", "Hazel", "Larch", "Oak",
                                               "Pine", "Rowan", "Willow", "Yew")) + ".")
    page.locator("llm-chat button.send").click()
    page.wait_for_function("n => window.__events.filter(e => e[0] === 'llm-token').length > n", arg=tokens_before)
    page.screenshot(path=shots / "streaming.png")
    page.locator("llm-chat button.stop").click()
    done = wait_event(page, "llm-done", after=done_before)
    reading = [p for p in events(page, "llm-progress")[progress_before:] if p["phase"] == "prefill"]
    assert len(reading) >= 2 and reading[0]["loaded"] == 0 and reading[0]["total"] > 64, reading
    assert [p["loaded"] for p in reading] == sorted(p["loaded"] for p in reading)
    assert all(p["total"] == reading[0]["total"] and p["loaded"] < p["total"] for p in reading), reading
    statuses = page.evaluate("window.__statuses")
    assert statuses.index("Reading your message…") < statuses.index("Writing the reply…"), statuses

    # Stopped: reported as "abort" (not the "stop" of a reply that ended by itself), marked in the conversation,
    # its usage counting the prompt it read and the tokens it gave out.
    assert done["finish_reason"] == "abort"
    assert done["usage"]["prompt_tokens"] >= reading[0]["total"] and done["usage"]["completion_tokens"] >= 1, done
    assert len(events(page, "llm-token")) - tokens_before < 20
    assert page.locator("llm-chat button.stop").is_hidden()
    assert page.locator("llm-chat textarea").is_enabled()
    reply = page.locator("llm-chat .message.assistant").last
    assert "stopped" in reply.get_attribute("class") and "stopped" in reply.get_attribute("part")
    assert reply.locator(".note").inner_text() == "Stopped before the end"
    last = page.eval_on_selector("llm-chat", "el => el.history.at(-1)")
    assert last == {"role": "assistant", "content": done["text"], "stopped": True}
    saved = json.loads(page.evaluate(
        "localStorage.getItem(Object.keys(localStorage).find((k) => k.startsWith('llmchat-chat:/index.html')))"))
    assert saved["messages"][-1] == last  # kept for the next visit with its mark
    assert page.evaluate("window.__statuses.at(-1)").startswith("Ready: SmolLM2 135M Instruct")


def test_stop_while_the_prompt_is_read_ends_the_reply_with_no_token(shared, server):
    """Stop pressed while a one-step prompt is read: the step under way finishes (it samples the first token), but
    that token is not sent; the reply ends as stopped, with nothing in it."""
    context, page = shared
    chat_page(page, server)
    done_before = len(events(page, "llm-done"))
    tokens_before = len(events(page, "llm-token"))
    # Stop as soon as the prompt's reading shows, from inside the page (no round trip to the test in between).
    page.evaluate("""() => {
      const stop = document.querySelector("llm-chat").shadowRoot.querySelector("button.stop");
      const once = (event) => {
        if (event.detail.phase !== "prefill") return;
        document.removeEventListener("llm-progress", once);
        stop.click();
      };
      document.addEventListener("llm-progress", once);
    }""")
    page.eval_on_selector("llm-chat", "el => el.setAttribute('max-tokens', '50')")
    page.locator("llm-chat textarea").fill("Tell me a story about a dragon.")
    page.locator("llm-chat button.send").click()
    done = wait_event(page, "llm-done", after=done_before)
    assert done["finish_reason"] == "abort" and done["text"] == "", done
    assert done["usage"]["prompt_tokens"] > 0 and done["usage"]["completion_tokens"] == 0, done
    assert len(events(page, "llm-token")) == tokens_before  # nothing after the Stop
    assert page.locator("llm-chat button.stop").is_hidden() and page.locator("llm-chat textarea").is_enabled()


def test_js_api_streams_openai_shaped_chunks(shared, server, native):
    context, page = shared
    server.pages["/api.html"] = """<!doctype html><script type="module">
      import { createEngine } from "/llm-chat.js";
      const engine = window.engine = await createEngine({ model: "%s" });
      const raw = [];
      for await (const chunk of await engine.completions.create(
          { prompt: %s, max_tokens: 3, stream: true, ignore_eos: true })) raw.push(chunk);
      const chat = [];
      const stream = await engine.chat.completions.create({ stream: true, max_tokens: 2,
        messages: [{ role: "system", content: %s }, { role: "user", content: %s }] });
      for await (const chunk of stream) chat.push(chunk);
      const whole = await engine.chat.completions.create({ max_tokens: 2,
        messages: [{ role: "system", content: %s }, { role: "user", content: %s }] });
      window.result = { raw, chat, whole, info: engine.info };
    </script>""" % (MODEL, json.dumps(GOLDEN["prompts"][0]["text"]), json.dumps(SYSTEM), json.dumps(QUESTION),
                    json.dumps(SYSTEM), json.dumps(QUESTION))
    page.goto(f"{server.url}/api.html")
    page.wait_for_function("window.result")
    result = page.evaluate("window.result")

    # Crossings into JS per token: count the GPU bridge's calls during a completion whose programs exist already.
    worker = next(w for w in page.workers if w.url.endswith("/worker.js"))
    worker.evaluate("""() => {
      const bridge = self.llmchatGPU;
      self.calls = {};
      for (const name of Object.getOwnPropertyNames(Object.getPrototypeOf(bridge))) {
        if (name === "constructor" || typeof bridge[name] !== "function") continue;
        const method = bridge[name];
        bridge[name] = (...args) => {  // counted when called from outside the bridge (from Python)
          if (self.inside) return method.apply(bridge, args);
          self.calls[name] = (self.calls[name] || 0) + 1;
          self.inside = true;
          try {
            return method.apply(bridge, args);
          } finally {
            self.inside = false;
          }
        };
      }
    }""")
    usage = page.evaluate("""async (prompt) => {
      let last = null;
      for await (last of await window.engine.completions.create(
          { prompt, max_tokens: 4, stream: true, ignore_eos: true, stream_options: { include_usage: true } }));
      return last.choices.length ? null : last.usage;  // the closing chunk, the usage alone
    }""", GOLDEN["prompts"][0]["text"])
    # One prefill step and three decode steps, each a single call: the read that ends it (writes and the replay
    # travel with it).
    assert worker.evaluate("self.calls") == {"read": usage["completion_tokens"]} == {"read": 4}
    raw = result["raw"]
    ids = [c["llmchat"]["token"] for c in raw if "token" in c.get("llmchat", {})]
    assert ids == native["raw"] == GOLDEN["prompts"][0]["greedy_ids"][:3]
    assert all(c["object"] == "text_completion" for c in raw)
    assert raw[-1]["choices"][0]["finish_reason"] == "length"
    assert not any("usage" in c for c in raw)  # none unless stream_options.include_usage asks, as OpenAI
    chat = result["chat"]
    assert chat[0]["object"] == "chat.completion.chunk" and chat[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["choices"][0]["finish_reason"] is None for c in chat[:-1])
    assert chat[-1]["choices"][0]["finish_reason"] == "length"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chat)
    assert text and result["whole"]["choices"][0]["message"] == {"role": "assistant", "content": text}


WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
                   "required": ["city"], "additionalProperties": False}}}]
PLANET = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "moons": {"type": "integer", "minimum": 0, "maximum": 200}},
          "required": ["name", "moons"], "additionalProperties": False}


def test_structured_output_and_tool_calls_in_the_browser(shared, server, smollm2_path):
    """The JS API takes response_format and tools as the server does, with the native engine's answers; the
    element shows a call, asks the page for its result with llm-tool-call, and goes on with it."""
    from llmchat.api import LLM

    ask_planet = [{"role": "user", "content": "Describe Mars as JSON."}]
    fmt = {"type": "json_schema", "json_schema": {"name": "planet", "schema": PLANET}}
    ask_weather = [{"role": "user", "content": "What is the weather in Paris?"}]
    llm = LLM(str(smollm2_path), context=256)
    native_json = list(llm.chat(ask_planet, max_tokens=40, response_format=fmt))[-1].message
    llm.reset_chat()
    native_call = list(llm.chat(ask_weather, max_tokens=60, tools=WEATHER, tool_choice="required"))[-1]
    llm.runtime.device.close()

    context, page = shared
    server.pages["/tools.html"] = """<!doctype html><script type="module">
      import { createEngine } from "/llm-chat.js";
      const engine = await createEngine({ model: "%s" });
      const json = await engine.chat.completions.create({ max_tokens: 40, messages: %s, response_format: %s });
      const chunks = [];
      for await (const chunk of await engine.chat.completions.create({ max_tokens: 60, stream: true, messages: %s,
          tools: %s, tool_choice: "required" })) chunks.push(chunk);
      window.result = { json, chunks };
    </script>""" % (MODEL, json.dumps(ask_planet), json.dumps(fmt), json.dumps(ask_weather), json.dumps(WEATHER))
    page.goto(f"{server.url}/tools.html")
    page.wait_for_function("window.result", timeout=TIMEOUT * 2)
    result = page.evaluate("window.result")
    assert result["json"]["choices"][0]["message"] == native_json
    if result["json"]["choices"][0]["finish_reason"] == "stop":
        jsonschema.validate(json.loads(native_json["content"]), PLANET)
    chunks = result["chunks"]
    assert chunks[-1]["choices"][0]["finish_reason"] == native_call.finish_reason == "tool_calls"
    parts = [p for c in chunks for p in c["choices"][0]["delta"].get("tool_calls", [])]
    want = native_call.message["tool_calls"][0]["function"]
    assert parts[0]["function"]["name"] == want["name"] and parts[0]["id"]
    assert "".join(p["function"].get("arguments", "") for p in parts) == want["arguments"]
    assert not "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)

    page.goto(f"{server.url}/index.html?model={MODEL}")
    wait_event(page, "llm-ready")
    page.eval_on_selector("llm-chat", "el => el.reset()")  # the earlier tests' conversation was restored
    page.evaluate("""() => {
      window.__calls = [];
      const chat = document.querySelector("llm-chat");
      chat.tools = %s;
      chat.maxToolRounds = 1;  // one completion may call; the next answers with the result
      chat.addEventListener("llm-tool-call", (event) => {
        window.__calls.push({ name: event.detail.name, args: event.detail.args });
        event.detail.respond(Promise.resolve({ celsius: 18, sky: "cloudy" }));
      });
    }""" % json.dumps(WEATHER))
    before = len(events(page, "llm-done"))
    _, done = ask(page, "What is the weather in Paris?", 60)
    if done["finish_reason"] == "tool_calls":  # the first completion called the tool: the page answered it
        wait_event(page, "llm-done", after=before + 1)
    page.wait_for_function("!document.querySelector('llm-chat').current", timeout=TIMEOUT)
    calls = page.evaluate("window.__calls")
    assert calls and all(c["name"] == "get_weather" and isinstance(c["args"]["city"], str) for c in calls)
    history = page.eval_on_selector("llm-chat", "el => el.history")
    tool_results = [m for m in history if m["role"] == "tool"]
    assert len(tool_results) == len(calls)
    assert all(json.loads(m["content"]) == {"celsius": 18, "sky": "cloudy"} for m in tool_results)
    assert history[-1]["role"] == "assistant" and "tool_calls" not in history[-1]


def test_offline_reload_loads_from_cache_and_answers(shared, server, shots):
    context, page = shared
    page.goto(f"{server.url}/index.html?model={MODEL}")
    page.evaluate("navigator.serviceWorker.ready.then(() => true)")  # shell, Pyodide and wheels are cached
    wait_event(page, "llm-ready")
    context.set_offline(True)
    server.log.clear()
    try:
        page.reload()
        ready = wait_event(page, "llm-ready")
        assert ready["fromCache"] and ready["requests"] == 0
        assert ready["python"] == {"start": "snapshot"}  # restored from the first load's snapshot, not booted
        tokens, done = ask(page, "Hi", max_tokens=2)
        page.screenshot(path=shots / "offline.png")
        assert len(tokens) >= 1 and done["finish_reason"] in ("length", "stop")
    finally:
        context.set_offline(False)
    # Only the browser's own update check of the service worker script went out (Chromium does not hold it back
    # under offline emulation); the page, its worker, Pyodide, the wheels and the model all came from the caches.
    assert [path for path, _ in server.log.requests if path != "/sw.js"] == [], server.log.requests


def chat_page(page, server) -> None:
    """Make `page` the chat app with its model ready (reusing it when an earlier test left it so)."""
    if "/index.html" not in page.url or not events(page, "llm-ready") or events(page, "llm-error"):
        page.goto(f"{server.url}/index.html?model={MODEL}")
        wait_event(page, "llm-ready")


@pytest.mark.parametrize("damage", ["another-build", "body"])
def test_a_damaged_python_snapshot_is_refused_and_replaced(shared, server, damage):
    """Where the snapshot was: one tagged for other wheels (another build of llmchat: its modules are not these), or
    the right tag before garbage. The load restores the snapshot web/dist serves instead, says why, answers, and
    keeps that one for the next load."""
    context, page = shared
    page.goto(f"{server.url}/index.html?model={MODEL}")
    wait_event(page, "llm-ready")
    tag = page.evaluate("""async () => {
        const root = await navigator.storage.getDirectory();
        const file = await (await root.getFileHandle("llmchat-python.snapshot")).getFile();
        return await file.slice(0, 32).text();
    }""")
    assert len(tag) == 32 and int(tag, 16) >= 0  # the digest of the wheels it was made from
    other = f"{int(tag, 16) ^ 1:032x}"
    write_opfs(page, "llmchat-python.snapshot", (other if damage == "another-build" else tag).encode() +
               bytes([7]) * 4096)
    page.reload()
    ready = wait_event(page, "llm-ready")
    assert ready["python"]["start"] == "served" and ready["python"]["snapshot"] == "saved", ready["python"]
    reason = "another build of llmchat" if damage == "another-build" else "magic"  # ours, or Pyodide's own
    assert ready["python"]["refused"].startswith("snapshot: ") and reason in ready["python"]["refused"], ready
    tokens, done = ask(page, "Hi", max_tokens=2)
    assert len(tokens) >= 1 and done["finish_reason"] in ("length", "stop")
    page.reload()
    assert wait_event(page, "llm-ready")["python"] == {"start": "snapshot"}


@pytest.mark.parametrize("served", ["missing", "another-build", "another-pyodide"])
def test_without_a_usable_served_snapshot_python_boots_and_keeps_its_own(recorded, server, served):
    """web/dist serves no snapshot where its build found no Node with JSPI (tools/build/build_web_dist.py warns), an old
    one may linger in a cache after an update, and a page may take Pyodide from elsewhere (pyodide-url; the served
    snapshot is then not even fetched). The first visit boots Python, says why, answers, and keeps the snapshot it
    made, which the next load restores."""
    page_url = f"{server.url}/index.html?model={MODEL}"
    if served == "missing":
        recorded.route("**/llmchat-python.snapshot.gz", lambda route: route.fulfill(status=404))
    elif served == "another-build":  # a snapshot made with other wheels: the right format, another tag
        body = gzip.decompress((WEB / "dist" / "pyodide" / "llmchat-python.snapshot.gz").read_bytes())
        other = gzip.compress(f"{int(body[:32], 16) ^ 1:032x}".encode() + body[32:], compresslevel=1)
        recorded.route("**/llmchat-python.snapshot.gz", lambda route: route.fulfill(status=200, body=other))
    else:  # Pyodide from another folder (the same files, as a CDN's copy would be)
        recorded.route(lambda url: urlsplit(url).path.startswith("/cdn/pyodide/"), lambda route: route.fulfill(
            path=WEB / "dist" / "pyodide" / urlsplit(route.request.url).path.rsplit("/", 1)[1]))
        page_url += "&pyodide-url=/cdn/pyodide/"
    page = recorded.new_page()
    page.goto(page_url)
    ready = wait_event(page, "llm-ready")
    assert ready["python"]["start"] == "boot" and ready["python"]["snapshot"] == "saved", ready["python"]
    reason = {"missing": "HTTP 404", "another-build": "another build of llmchat",
              "another-pyodide": "/cdn/pyodide/"}[served]
    assert ready["python"]["refused"].startswith("served: ") and reason in ready["python"]["refused"], ready
    tokens, done = ask(page, "Hi", max_tokens=2)
    assert len(tokens) >= 1 and done["finish_reason"] in ("length", "stop")
    page.reload()
    assert wait_event(page, "llm-ready")["python"] == {"start": "snapshot"}


KERNELS_FILE = "llmchat-kernels.json"


def _load_and_read_kernels_file(page, server) -> tuple[dict, str, list]:
    """Load the model, then read the kernels file: (all of it, this model's key, the kernels the load asked for)."""
    page.goto(f"{server.url}/index.html?model={MODEL}")
    wait_event(page, "llm-ready")
    stored = json.loads(read_opfs(page, KERNELS_FILE))
    key = next(k for k in stored if MODEL in k)
    return stored, key, list(stored[key])


def test_a_second_load_prepares_its_kernels_before_python_asks(shared, server):
    """The kernels a load waited for (the decode step's) are kept in OPFS; the next load of the model starts
    compiling them before Python starts, and uses every one; the prompt step's kernels, asked once the load is
    done, are not in the list. The answer is the same."""
    context, page = shared
    server.pages["/kernels.html"] = """<!doctype html><script type="module">
      import { createEngine } from "/llm-chat.js";
      const engine = await createEngine({ model: "%s" });
      let text = "";
      const ids = [];
      for await (const chunk of await engine.completions.create(
          { prompt: %s, max_tokens: 3, stream: true, ignore_eos: true })) {
        text += chunk.choices[0].text;
        if ("token" in (chunk.llmchat || {})) ids.push(chunk.llmchat.token);
      }
      window.result = { text, ids, info: engine.info, after: await engine.gpuStats() };
    </script>""" % (MODEL, json.dumps(GOLDEN["prompts"][0]["text"]))
    page.goto(f"{server.url}/kernels.html")
    page.wait_for_function("window.result", timeout=TIMEOUT)
    first = page.evaluate("window.result")
    stored = json.loads(read_opfs(page, KERNELS_FILE))
    assert isinstance(stored, dict) and 1 <= len(stored) <= 4
    specs = next(v for k, v in stored.items() if MODEL in k)
    requested = first["info"]["gpu"]["requested"]
    assert 0 < len(specs) < requested, (len(specs), requested)
    # The prompt step's matmul tiles (more than one token a tile) compile later.
    assert not [name for name, _, _, _ in specs if name.startswith("matmul") and "[TT=1]" not in name], specs
    # The load started the prompt step's and greedy sampling's kernels too: the reply needed none of its own.
    assert first["after"]["requested"] == requested, (first["after"], first["info"]["gpu"])
    assert all(isinstance(name, str) and "fn main" in code for name, code, _, _ in specs)
    page.reload()
    page.wait_for_function("window.result", timeout=TIMEOUT)
    again = page.evaluate("window.result")
    info, gpu = again["info"], again["info"]["gpu"]
    assert info["kernels"] == {"prepared": len(specs), "file": "unchanged"}, info["kernels"]
    assert gpu["prepared"] == gpu["prepared_used"] == len(specs) and gpu["requested"] == requested, gpu
    assert again["ids"] == first["ids"] == GOLDEN["prompts"][0]["greedy_ids"][:3]
    assert again["text"] == first["text"]


@pytest.mark.parametrize("damage", ["garbage", "wrong-shape"])
def test_a_damaged_kernels_file_is_ignored_and_replaced(shared, server, damage):
    """Garbage, or JSON that is not {key: [kernel, ...]}, where the kernels file was: the load prepares nothing,
    says why, succeeds, and writes a good file that the next load prepares from."""
    context, page = shared
    page.goto(f"{server.url}/index.html?model={MODEL}")
    wait_event(page, "llm-ready")
    content = bytes([7]) * 4096 if damage == "garbage" else json.dumps({"key": {"name": "x"}, "other": [[1, 2, 3, 4]]})
    write_opfs(page, KERNELS_FILE, content)
    page.reload()
    ready = wait_event(page, "llm-ready")
    assert ready["kernels"]["prepared"] == 0 and ready["kernels"]["file"] == "saved", ready["kernels"]
    assert ready["kernels"]["refused"], ready["kernels"]
    assert ready["gpu"]["prepared"] == ready["gpu"]["prepared_used"] == 0
    tokens, done = ask(page, "Hi", max_tokens=2)
    assert len(tokens) >= 1 and done["finish_reason"] in ("length", "stop")
    stored = json.loads(read_opfs(page, KERNELS_FILE))
    assert list(stored) == [k for k in stored if MODEL in k] and len(stored) == 1
    page.reload()
    ready = wait_event(page, "llm-ready")
    assert 0 < ready["kernels"]["prepared"] == ready["gpu"]["prepared_used"] < ready["gpu"]["requested"]


def test_stored_kernels_that_fail_to_compile_are_not_reported_unless_asked_for(shared, server):
    """A kernel in the stored list that does not compile, and that Python never asks for, costs nothing but its
    compile: the load succeeds, and the list is rewritten without it."""
    context, page = shared
    stored, key, asked = _load_and_read_kernels_file(page, server)
    stored[key] = [["broken", "fn main( {", ["storage"], {}]] + asked
    write_opfs(page, KERNELS_FILE, json.dumps(stored))
    page.reload()
    ready = wait_event(page, "llm-ready")
    assert ready["kernels"] == {"prepared": len(asked) + 1, "file": "saved"}, ready["kernels"]
    assert ready["gpu"]["prepared"] == len(asked) + 1 and ready["gpu"]["prepared_used"] == len(asked)
    tokens, done = ask(page, "Hi", max_tokens=2)
    assert len(tokens) >= 1 and done["finish_reason"] in ("length", "stop")
    assert json.loads(read_opfs(page, KERNELS_FILE))[key] == asked


def test_a_stale_kernel_list_stops_being_prepared_at_pythons_first_request(shared, server):
    """A stored list none of whose kernels Python asks for (as after an upgrade of llmchat): only the kernel being
    compiled when Python first asks is spent on it, the rest is dropped rather than queued ahead of the kernels
    asked for, and the list is replaced."""
    context, page = shared
    stored, key, asked = _load_and_read_kernels_file(page, server)
    # Four older builds of every kernel: far more compiling (~20 s on SwiftShader) than Python takes to start, so
    # the first request surely finds most of the list not started, however fast this machine compiles.
    stale = [[name, code + f"\n// an older build {i}", kinds, constants]
             for i in range(4) for name, code, kinds, constants in asked]
    stored[key] = stale
    write_opfs(page, KERNELS_FILE, json.dumps(stored))
    page.reload()
    ready = wait_event(page, "llm-ready")
    assert ready["kernels"]["file"] == "saved" and ready["gpu"]["prepared_used"] == 0, ready
    assert 1 <= ready["gpu"]["prepared"] < len(stale) // 2, ready["gpu"]
    assert json.loads(read_opfs(page, KERNELS_FILE))[key] == asked


def test_a_lost_device_ends_the_reply_with_a_message(shared, server, shots):
    context, page = shared
    chat_page(page, server)
    errors_before = len(events(page, "llm-error"))
    tokens_before = len(events(page, "llm-token"))
    page.eval_on_selector("llm-chat", "el => el.setAttribute('max-tokens', '200')")
    page.locator("llm-chat textarea").fill("Count to one hundred.")
    page.locator("llm-chat button.send").click()
    page.wait_for_function("n => window.__events.filter(e => e[0] === 'llm-token').length > n", arg=tokens_before)
    worker = next(w for w in page.workers if w.url.endswith("/worker.js"))
    worker.evaluate("self.llmchatGPU.device.destroy()")  # what a driver reset or a GPU process crash looks like
    page.wait_for_function("n => window.__events.filter(e => e[0] === 'llm-error').length > n", arg=errors_before,
                           timeout=30_000)
    codes = {e["code"] for e in events(page, "llm-error")[errors_before:]}
    assert "device-lost" in codes, codes
    page.wait_for_function("() => document.querySelector('llm-chat').shadowRoot.querySelector('.stop').hidden")
    assert "Reload" in page.locator("llm-chat .status").inner_text()
    assert page.locator("llm-chat textarea").is_disabled()
    replies, questions = (page.locator(f"llm-chat .message.{role}").count() for role in ("assistant", "user"))
    assert replies == questions - 1  # the cut reply was taken away, not left half-written
    page.screenshot(path=shots / "device-lost.png")

def test_without_webgpu_the_user_is_told_and_nothing_downloads(recorded, server, shots):
    context = recorded
    context.add_init_script("delete Navigator.prototype.gpu;")  # a browser without WebGPU
    try:
        page = context.new_page()
        server.log.clear()
        page.goto(f"{server.url}/index.html?model={MODEL}")
        page.wait_for_function("window.__events.some(e => e[0] === 'llm-error')")
        error = events(page, "llm-error")[0]
        assert error["code"] == "no-webgpu"
        status = page.locator("llm-chat .status").inner_text()
        assert "WebGPU" in status and "cannot run" in status
        assert page.locator("llm-chat textarea").is_disabled()
        page.screenshot(path=shots / "no-webgpu.png")
        assert server.log.model_requests() == []
    finally:
        context.close()


def test_interrupted_download_resumes_and_is_verified(launch_profile, server, smollm2_path, tmp_path, shots):
    from llmchat.hub.catalogue import CATALOGUE
    entry = CATALOGUE["smollm2"]
    context = _launch(launch_profile, tmp_path / "profile")
    page = context.new_page()
    server.faults.drop_model_at = 40 << 20  # the server closes the connection 40 MiB into the file
    server.log.clear()
    page.goto(f"{server.url}/index.html?model={MODEL}&integrity=sha256:{entry.sha256}")
    page.wait_for_function("window.__events.some(e => e[0] === 'llm-progress' && e[1].loaded > 0)")
    page.screenshot(path=shots / "downloading.png")
    ready = wait_event(page, "llm-ready")
    assert server.faults.drop_model_at is None  # the fault fired
    assert ready["resumes"] >= 1
    starts = [int(r.split("=")[1].split("-")[0]) for _, r in server.log.model_requests() if r]
    # Resumed inside the 16 MiB piece that broke (from its last byte written to OPFS, which depends on how the
    # stream was chunked when the connection dropped), not from 0 and not from the piece's start at 32 MiB.
    assert any(32 << 20 < s <= 40 << 20 for s in starts), starts
    # The bytes on disk are the file's: the store checked the sha256 the page gave before calling it ready.
    assert ready["sha256"] == entry.sha256


def test_a_wrong_integrity_discards_the_download(launch_profile, server, tmp_path):
    context = _launch(launch_profile, tmp_path / "profile")
    page = context.new_page()
    page.goto(f"{server.url}/index.html?model={MODEL}&integrity=sha256:{'0' * 64}")
    page.wait_for_function("window.__events.some(e => e[0] === 'llm-error')")
    error = events(page, "llm-error")[-1]
    assert error["code"] == "integrity" and "discarded" in error["message"]
    assert not events(page, "llm-ready")


def test_a_file_that_is_not_a_model_is_refused_after_its_first_bytes(recorded, server):
    context = recorded
    try:
        page = context.new_page()
        server.log.clear()
        page.goto(f"{server.url}/index.html?model=/llm-chat.js")  # served with Range, but JavaScript
        page.wait_for_function("window.__events.some(e => e[0] === 'llm-error')")
        error = events(page, "llm-error")[0]
        assert error["code"] == "bad-model" and "GGUF" in error["message"], error
        assert [r for p, r in server.log.requests if p == "/llm-chat.js" and r] == ["bytes=0-1048575"]
    finally:
        context.close()

def test_controls_are_labelled_and_the_element_is_themeable(recorded, server):
    context = recorded
    try:
        page = context.new_page()
        server.pages["/theme.html"] = f"""<!doctype html><script type="module" src="/llm-chat.js"></script>
            <style>
              llm-chat {{ --llm-chat-accent: rgb(200, 0, 0); }}
              llm-chat::part(assistant) {{ background: rgb(0, 128, 0); }}
            </style>
            <llm-chat mode="remote" endpoint="{server.url}/v1"></llm-chat>"""
        page.goto(f"{server.url}/theme.html")
        wait_event(page, "llm-ready")
        chat = page.locator("llm-chat")
        assert chat.get_by_label("Message").is_editable()
        assert chat.get_by_role("button", name="Send").is_enabled()
        assert page.locator("llm-chat .log").get_attribute("aria-live") == "polite"
        assert page.locator("llm-chat progress").get_attribute("aria-label")
        ask(page, "Hello", max_tokens=4)
        send_bg = page.locator("llm-chat button.send").evaluate("b => getComputedStyle(b).backgroundColor")
        reply_bg = page.locator("llm-chat .assistant").evaluate("m => getComputedStyle(m).backgroundColor")
        assert (send_bg, reply_bg) == ("rgb(200, 0, 0)", "rgb(0, 128, 0)")
        assert page.locator("llm-chat .log").get_attribute("aria-busy") == "false"
    finally:
        context.close()

def test_markup_in_replies_and_messages_stays_text(recorded, server, shots):
    payload = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script><b>bold</b>'
    server.remote_reply = payload
    context = recorded
    try:
        page = context.new_page()
        server.pages["/remote.html"] = f"""<!doctype html><script type="module" src="/llm-chat.js"></script>
            <llm-chat mode="remote" endpoint="{server.url}/v1"></llm-chat>"""
        page.goto(f"{server.url}/remote.html")
        wait_event(page, "llm-ready")
        _, done = ask(page, '<img src=y onerror="window.pwned=3">hello', max_tokens=8)
        page.screenshot(path=shots / "inert-markup.png")
        assert done["text"] == payload
        assert page.evaluate("window.pwned") is None
        log = page.locator("llm-chat .log")
        assert log.locator("img, script, b").count() == 0
        assert payload in log.inner_text()
    finally:
        server.remote_reply = "Hello from the server."
        context.close()



def test_gemma3_answers_through_the_element_like_the_native_engine(launch_profile, server, gemma3_path, tmp_path,
                                                                    shots):
    """Gemma 3 270M (262,144-token vocabulary: its Q8_0 embedding table spans two bindings on a phone-class limit,
    one here) through <llm-chat>: the same greedy tokens as the native engine for the same conversation."""
    from llmchat.api import LLM
    llm = LLM(str(gemma3_path), context=256)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    want = [e.token for e in llm.generate(messages, max_tokens=2) if e.token is not None]
    llm.runtime.device.close()

    context = _launch(launch_profile, tmp_path / "profile")
    page = context.new_page()
    page.goto(f"{server.url}/index.html?model=/models/{gemma3_path.name}")
    page.eval_on_selector("llm-chat", f"el => el.setAttribute('system-prompt', {SYSTEM!r})")
    ready = wait_event(page, "llm-ready", timeout=4 * TIMEOUT)
    assert ready["arch"] == "gemma3" and ready["vocab"] == 262144
    tokens, done = ask(page, QUESTION, max_tokens=2)
    page.screenshot(path=shots / "gemma3.png")
    assert [t["token"] for t in tokens] == want
    assert done["finish_reason"] in ("length", "stop")
    context.close()


def _tiny_model_like_native(page, tmp_path, name: str, context: int | None = 128, **params) -> None:
    """A tiny random model through the JS API gives the same greedy tokens as the native engine; the engine's
    context is `context`, or when the page names none, Python's default for the model (its trained length, the
    tiny models' 512, being under 2048)."""
    from llmchat.api import LLM
    from model_factory import write_model
    models = tmp_path / "models"
    models.mkdir()
    path = write_model(models / f"{name}.gguf", **params)
    prompt = "hello there"
    llm = LLM(str(path), context=128)
    want = [e.token for e in llm.generate(prompt, max_tokens=6, ignore_eos=True) if e.token is not None]
    llm.runtime.device.close()
    with WebServer(WEB, models) as srv:
        srv.pages["/tiny.html"] = """<!doctype html><script type="module">
          import { createEngine } from "/llm-chat.js";
          const engine = await createEngine({ model: "/models/%s.gguf"%s });
          const ids = [];
          for await (const chunk of await engine.completions.create(
              { prompt: %s, max_tokens: 6, stream: true, ignore_eos: true })) {
            if (chunk.llmchat?.token != null) ids.push(chunk.llmchat.token);
          }
          window.result = { ids, info: engine.info };
        </script>""" % (name, f", context: {context}" if context else "", json.dumps(prompt))
        page.goto(f"{srv.url}/tiny.html")
        page.wait_for_function("window.result")
        result = page.evaluate("window.result")
    assert result["info"]["arch"] == params["arch"]
    assert result["info"]["context"] == (context or params.get("context_length", 512))
    assert result["ids"] == want


def test_a_qwen3_shaped_model_runs_in_the_browser_like_the_native_engine(page, tmp_path):
    """A tiny random Qwen3 (q/k norms, NeoX RoPE, heads wider than n_embd / n_head)."""
    _tiny_model_like_native(page, tmp_path, "tiny-qwen3", context=None, arch="qwen3", n_layer=2, n_embd=64,
                            n_head=4, n_kv_head=2, head_dim=32, seed=3, tied=False)  # an output matrix of its own


def test_a_hybrid_lfm2_runs_in_the_browser_like_the_native_engine(page, tmp_path):
    """A tiny random LFM2: convolution blocks with their per-sequence state beside an attention block."""
    _tiny_model_like_native(page, tmp_path, "tiny-lfm2", arch="lfm2", n_layer=3, n_embd=64, n_head=4,
                            n_kv_head=2, n_ff=96, conv_layers=(True, False, True), seed=23)


def test_a_hybrid_qwen35_runs_in_the_browser_like_the_native_engine(page, tmp_path):
    """A tiny random Qwen3.5: gated DeltaNet layers (convolution and recurrent state per sequence) beside a gated
    full-attention layer."""
    _tiny_model_like_native(page, tmp_path, "tiny-qwen35", arch="qwen35", n_layer=3, n_embd=64, n_head=4,
                            n_kv_head=2, head_dim=32, n_ff=96, rope_dim=16, rope_sections=(3, 3, 2, 0),
                            recurrent_layers=(True, False, True), seed=33)


def test_a_model_over_the_profile_budget_is_refused_before_downloading(launch_profile, server, smollm2_path,
                                                                     tmp_path, shots):
    """<llm-chat profile="phone,gpu_budget=110MiB">: the phone profile's numbers come from Python
    (llmchat.gpu.profiles), applied to the page's adapter; the plan refuses the model from its header alone."""
    from llmchat.gguf.file import open_gguf
    with open_gguf(smollm2_path) as gguf:
        first_weight = min(t.offset for t in gguf.tensors.values())
    context = _launch(launch_profile, tmp_path / "profile")
    page = context.new_page()
    server.log.clear()
    page.goto(f"{server.url}/index.html?model={MODEL}&profile=phone,gpu_budget=110MiB")
    page.wait_for_function("window.__events.some(e => e[0] === 'llm-error')")
    error = events(page, "llm-error")[0]
    assert error["code"] == "too-large", error
    message = error["message"]
    assert "the 'phone' device profile" in message and "110.0 MiB GPU memory budget" in message, message
    assert "weights" in message and "KV cache" in message and "the largest context that fits is" in message
    assert not events(page, "llm-ready")
    assert message in page.locator("llm-chat .status").inner_text()
    page.screenshot(path=shots / "profile-too-large.png")
    # Only the header was fetched: every request started before the first weight, a few MiB in all.
    ranges = [r for _, r in server.log.model_requests()]
    assert ranges and all(r for r in ranges), ranges
    spans = [tuple(int(x) for x in r.split("=")[1].split("-")) for r in ranges]
    assert all(start < first_weight for start, _ in spans), spans
    assert sum(end - start + 1 for start, end in spans) <= 4 << 20, spans


def test_the_phone_profile_caps_the_browser_adapter(shared, server):
    """Under profile="phone" the worker's Python sees the page's adapter through llmchat.gpu.profiles: the model
    loads (it fits the 1 GiB budget) on an adapter with the profile's limits and without subgroups or f16."""
    context, _ = shared
    page = context.new_page()
    try:
        page.goto(f"{server.url}/index.html?model={MODEL}&profile=phone")
        ready = wait_event(page, "llm-ready")
        adapter = ready["adapter"]
        assert adapter["profile"] == "phone" and adapter["gpu_budget"] == 1 << 30
        assert not adapter["subgroups"] and not adapter["f16"] and adapter["subgroup_max_size"] == 0
        assert adapter["max_binding_size"] == 128 << 20 and adapter["max_storage_buffers"] <= 8
        assert ready["total"] < adapter["gpu_budget"]
    finally:
        page.close()
