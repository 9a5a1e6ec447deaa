"""The chat itself in headless Chromium: Markdown replies built as DOM nodes (and what they refuse to build),
incremental rendering while streaming, copy buttons, conversations that survive a reload, and regenerate/edit
reusing the engine's KV cache.

Rendering and persistence run against the test server's fake OpenAI endpoint (remote mode: no model to load); the
KV cache checks run SmolLM2 on WebGPU (SwiftShader), with replies a few tokens long.
"""
from __future__ import annotations

import json
import time

import pytest

from browser_server import WebServer
from test_browser import (MODEL, SYSTEM, WEB, _launch, ask, events,  # noqa: F401 (fixtures)
                          shots, wait_event)

REPLY = "\n".join([
    "## Plan",
    "",
    "Some **bold**, *emphasis* and `inline <b>code</b>`.",
    "",
    "- first",
    "- second",
    "",
    "1. one",
    "2. two",
    "",
    "```js",
    "const x = '<img src=x onerror=alert(1)>';",
    "```",
    "",
    "| name | value |",
    "|---|--:|",
    "| a | 1 |",
    "",
    "[safe](https://example.org/doc) [evil](javascript:window.pwned=1) [data](data:text/html,hi)",
    "![pixel](http://HOST/tracker.png) ![inline](javascript:window.pwned=2)",
    '<img src="/tracker2.png" onerror="window.pwned=3"> <script>window.pwned=4</script> <a href="/x">raw</a>',
])


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    with WebServer(WEB, tmp_path_factory.mktemp("no-models")) as srv:
        srv.remote_reply = REPLY.replace("HOST", srv.url.split("//")[1])
        srv.pages["/remote.html"] = f"""<!doctype html><script type="module" src="/llm-chat.js"></script>
            <llm-chat id="main" mode="remote" endpoint="{srv.url}/v1"></llm-chat>"""
        srv.pages["/plain.html"] = f"""<!doctype html><script type="module" src="/llm-chat.js"></script>
            <llm-chat render="text" persist="false" mode="remote" endpoint="{srv.url}/v1"></llm-chat>"""
        srv.pages["/forget.html"] = f"""<!doctype html><script type="module" src="/llm-chat.js"></script>
            <llm-chat persist="false" mode="remote" endpoint="{srv.url}/v1"></llm-chat>"""
        yield srv


def shadow(page, script: str):
    return page.evaluate(f"(() => {{ const root = document.querySelector('llm-chat').shadowRoot; {script} }})()")


def test_markdown_replies_are_dom_nodes_and_inert(launch_profile, remote, tmp_path, shots):
    context = _launch(launch_profile, tmp_path / "profile")
    requests: list[str] = []
    page = context.new_page()
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{remote.url}/remote.html")
    wait_event(page, "llm-ready")
    _, done = ask(page, "Show me everything", max_tokens=400)
    assert done["text"] == remote.remote_reply
    page.screenshot(path=shots / "markdown.png")
    reply = page.locator("llm-chat .message.assistant .md")
    assert reply.locator("h4").inner_text() == "Plan"  # "##" inside a bubble, two levels down
    assert reply.locator("strong").inner_text() == "bold" and reply.locator("em").inner_text() == "emphasis"
    assert reply.locator("p > code").inner_text() == "inline <b>code</b>"
    assert reply.locator("ul > li").all_inner_texts() == ["first", "second"]
    assert reply.locator("ol > li").all_inner_texts() == ["one", "two"]
    assert reply.locator(".code-block pre code").inner_text() == "const x = '<img src=x onerror=alert(1)>';"
    assert reply.locator("th").all_inner_texts() == ["name", "value"]
    assert reply.locator("td").all_inner_texts() == ["a", "1"]
    assert reply.locator("td").last.evaluate("td => td.style.textAlign") == "right"
    links = reply.locator("a").evaluate_all("as => as.map(a => [a.getAttribute('href'), a.rel, a.textContent])")
    tracker = f"{remote.url}/tracker.png"
    assert links == [["https://example.org/doc", "noopener noreferrer", "safe"],
                     [tracker, "noopener noreferrer", "pixel"]]  # an image is a link, never loaded
    text = reply.inner_text()
    for shown in ("[evil](javascript:window.pwned=1)", "[data](data:text/html,hi)",
                  "![inline](javascript:window.pwned=2)", '<img src="/tracker2.png" onerror="window.pwned=3">',
                  "<script>window.pwned=4</script>", '<a href="/x">raw</a>'):
        assert shown in text  # as text, exactly as the model wrote it
    log = page.locator("llm-chat .log")
    assert log.locator("img, script, iframe, object, embed, style, [onerror]").count() == 0
    assert page.evaluate("window.pwned") is None
    assert not [u for u in requests if "tracker" in u or "example.org" in u]
    assert not [p for p, _ in remote.log.requests if "tracker" in p]
    # Nothing under the bubble came from markup: every element is one the renderer makes.
    tags = set(reply.evaluate("el => [...el.querySelectorAll('*')].map(n => n.localName)"))
    assert tags <= {"h4", "p", "strong", "em", "code", "ul", "ol", "li", "div", "span", "button", "pre", "table",
                    "thead", "tbody", "tr", "th", "td", "a", "br"}, tags


def test_copy_buttons_use_the_clipboard_or_a_fallback(launch_profile, remote, tmp_path):
    context = _launch(launch_profile, tmp_path / "profile")
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=remote.url)
    page = context.new_page()
    page.goto(f"{remote.url}/remote.html")
    wait_event(page, "llm-ready")
    ask(page, "Code please", max_tokens=400)
    page.locator("llm-chat .code-block .copy-code").click()
    page.wait_for_function("() => navigator.clipboard.readText().then(t => t.startsWith('const x'))")
    assert page.evaluate("navigator.clipboard.readText()") == "const x = '<img src=x onerror=alert(1)>';"
    page.locator("llm-chat .message.assistant .actions .copy").click()
    page.wait_for_function("() => navigator.clipboard.readText().then(t => t.startsWith('## Plan'))")
    assert page.evaluate("navigator.clipboard.readText()") == remote.remote_reply  # the Markdown source
    assert page.locator("llm-chat .message.assistant .actions .copy").inner_text() == "Copied"

    # Without the Clipboard API (an insecure context, an old browser): a selected, hidden text box and "copy".
    page.evaluate("""() => {
      Object.defineProperty(Navigator.prototype, "clipboard", { get: () => undefined });
      window.__copied = [];
      document.addEventListener("copy", (event) => window.__copied.push(event.composedPath()[0].value));
    }""")
    page.locator("llm-chat .code-block .copy-code").click()
    page.wait_for_function("window.__copied.length > 0")
    assert page.evaluate("window.__copied") == ["const x = '<img src=x onerror=alert(1)>';"]
    assert shadow(page, "return root.querySelectorAll('textarea').length") == 1  # the fallback's box is gone


def test_streaming_rerenders_only_the_last_block_and_render_text_stays_plain(launch_profile, remote, tmp_path):
    context = _launch(launch_profile, tmp_path / "profile")
    page = context.new_page()
    page.goto(f"{remote.url}/plain.html")
    wait_event(page, "llm-ready")
    ask(page, "Plain", max_tokens=400)
    body = page.locator("llm-chat .message.assistant .body")
    assert body.evaluate("b => b.children.length") == 0  # one text node: today's plain text
    assert body.inner_text() == remote.remote_reply

    # The renderer the element uses, fed a reply piece by piece as a stream would: earlier blocks keep their
    # nodes (no flicker, selections survive), and only the nodes of the block being written are replaced.
    result = page.evaluate("""async (reply) => {
      const { MarkdownView } = await import("/markdown.js");
      const box = document.createElement("div");
      document.body.append(box);
      const view = new MarkdownView(box);
      const removed = [];
      new MutationObserver((records) => records.forEach((r) => removed.push(...r.removedNodes)))
        .observe(box, { childList: true });
      let firstNodes = null;
      const steps = [];
      for (let n = 1; n <= reply.length; n += 7) {
        view.update(reply.slice(0, n));
        await new Promise((r) => setTimeout(r, 0));
        steps.push(box.children.length);
        if (!firstNodes && box.children.length >= 3) firstNodes = [...box.children].slice(0, 2);
      }
      view.update(reply);
      await new Promise((r) => setTimeout(r, 0));
      return {
        kept: firstNodes.every((node) => node.isConnected && box.contains(node)),
        removedEarly: removed.filter((node) => firstNodes.includes(node)).length,
        blocks: box.children.length,
        html: box.innerHTML.includes("<script") || box.querySelector("img") !== null,
      };
    }""", "# Title\n\nFirst paragraph with **bold**.\n\n- one\n- two\n\n```py\nprint(1)\n```\n\nlast words")
    assert result["kept"] and result["removedEarly"] == 0, result
    assert result["blocks"] == 5 and not result["html"]


def test_a_conversation_survives_a_reload_unless_persist_is_false(launch_profile, remote, tmp_path):
    context = _launch(launch_profile, tmp_path / "profile")
    page = context.new_page()
    page.goto(f"{remote.url}/remote.html")
    wait_event(page, "llm-ready")
    ask(page, "Remember me", max_tokens=400)
    before = page.eval_on_selector("llm-chat", "el => el.history")
    assert [m["role"] for m in before] == ["user", "assistant"]
    page.reload()
    wait_event(page, "llm-ready")
    assert page.eval_on_selector("llm-chat", "el => el.history") == before
    assert page.locator("llm-chat .message.user .body").inner_text() == "Remember me"
    assert "safe" in page.locator("llm-chat .message.assistant .md").inner_text()  # rendered again
    keys = page.evaluate("Object.keys(localStorage)")
    assert keys == ["llmchat-chat:/remote.html#main:" + f"{remote.url}/v1"], keys
    page.eval_on_selector("llm-chat", "el => el.reset()")  # reset forgets the saved copy too
    assert page.evaluate("Object.keys(localStorage)") == []

    page.goto(f"{remote.url}/forget.html")
    wait_event(page, "llm-ready")
    ask(page, "Forget me", max_tokens=400)
    assert page.evaluate("Object.keys(localStorage)") == []
    page.reload()
    wait_event(page, "llm-ready")
    assert page.eval_on_selector("llm-chat", "el => el.history") == []
    assert page.locator("llm-chat .message").count() == 0


def chat_files(page) -> list[dict]:
    """The conversations kept in the page origin's OPFS (worker.js, CHATS_DIR): [{name, size}], size None while a
    save holds the file open. A file deleted while the folder is listed is left out."""
    return page.evaluate("""async () => {
        const root = await navigator.storage.getDirectory();
        const dir = await root.getDirectoryHandle("llmchat-chats").catch(() => null);
        const files = [];
        if (dir) for await (const [name, handle] of dir.entries()) {
          const size = await handle.getFile().then((f) => f.size, (e) => (e.name === "NotFoundError" ? undefined : null));
          if (size !== undefined) files.push({ name, size });
        }
        return files;
    }""")


def done_after(page, n: int) -> dict:
    return wait_event(page, "llm-done", after=n)


def test_reload_restores_the_kv_cache_and_edit_and_regenerate_reuse_it(launch_profile, smollm2_path, tmp_path, shots):
    with WebServer(WEB, smollm2_path.parent) as srv:
        srv.pages["/local.html"] = f"""<!doctype html><script type="module" src="/llm-chat.js"></script>
            <script>document.addEventListener("llm-restore", (e) => window.__events.push(["llm-restore", e.detail]));
            </script>
            <llm-chat id="local" model="{MODEL}" system-prompt="{SYSTEM}" max-tokens="3"></llm-chat>"""
        context = _launch(launch_profile, tmp_path / "profile")
        try:
            page = context.new_page()
            page.goto(f"{srv.url}/local.html")
            wait_event(page, "llm-ready")
            turns = []
            for question in ("Capital of France?", "And of Italy?", "And of Spain?"):
                turns.append(ask(page, question, max_tokens=3)[1])
            history = page.eval_on_selector("llm-chat", "el => el.history")
            assert len(history) == 6

            # Reload: the conversation comes back, and its KV cache is read back from OPFS before anyone asks.
            kept = chat_files(page)
            assert len(kept) == 1 and kept[0]["size"] > 0, kept
            t0 = time.perf_counter()
            page.reload()
            wait_event(page, "llm-ready")
            restore = wait_event(page, "llm-restore")
            wall = time.perf_counter() - t0
            assert page.eval_on_selector("llm-chat", "el => el.history") == history
            assert restore["messages"] == 6 and restore["prompt_tokens"] > turns[-1]["usage"]["prompt_tokens"]
            kv = restore["kv_cache"]
            assert kv["restored"] > turns[-1]["usage"]["prompt_tokens"] and "refused" not in kv, kv
            # Everything the last turn computed came from storage; only the tail of its reply's text, re-read, and
            # the template's closing tokens were computed.
            assert restore["cached_tokens"] >= turns[-1]["usage"]["prompt_tokens"], restore
            assert kv["saved"] == restore["prompt_tokens"] and kv["written"] <= 16 + restore["prompt_tokens"] - \
                restore["cached_tokens"], kv

            # A damaged file is refused, and the KV cache is rebuilt in one prefill instead.
            page.evaluate("""async () => {
                const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("llmchat-chats");
                for await (const [name] of dir.entries()) {
                    const file = await (await dir.getFileHandle(name)).createWritable();
                    await file.write(new TextEncoder().encode("LLMCKV02 but nothing else"));
                    await file.close();
                }
            }""")
            page.reload()
            wait_event(page, "llm-ready")
            rebuilt = wait_event(page, "llm-restore")
            assert "cut short" in rebuilt["kv_cache"]["refused"] or "damaged" in rebuilt["kv_cache"]["refused"], \
                rebuilt
            assert rebuilt["cached_tokens"] == 0 and rebuilt["prompt_tokens"] == restore["prompt_tokens"]
            assert rebuilt["kv_cache"]["saved"] == rebuilt["prompt_tokens"]  # the file is whole again
            print(f"\nrestore of {restore['prompt_tokens']} tokens of {restore['messages']} messages: from OPFS "
                  f"{restore['ms']:.0f} ms ({kv['restored']} positions read in {kv['restore_ms']:.0f} ms, "
                  f"{restore['prompt_tokens'] - restore['cached_tokens']} computed, saved in {kv['save_ms']:.0f} ms; "
                  f"reload to restored {wall:.1f} s), rebuilt by prefill {rebuilt['ms']:.0f} ms at "
                  f"{rebuilt['prefill_tok_s']:.1f} tok/s")
            restore = rebuilt
            # The kept cache counts in the site's storage, and deleteConversations removes it (the text stays).
            kept = chat_files(page)
            api = "import('/llm-chat.js').then((m) => m.{}())"
            assert page.evaluate(api.format("storageEstimate"))["conversations"] == kept[0]["size"] > 0
            assert page.evaluate(api.format("deleteConversations")) == kept[0]["size"]
            assert chat_files(page) == [] and page.evaluate(api.format("storageEstimate"))["conversations"] == 0
            _, after = ask(page, "And of Germany?", max_tokens=2)
            usage = after["usage"]
            cached = usage["prompt_tokens_details"]["cached_tokens"]
            assert cached >= restore["prompt_tokens"] - 3, usage  # only the new message computed
            print(f"next turn after restore: {usage['prompt_tokens']} prompt tokens, {cached} cached")

            # Regenerate: the same prompt again; everything but its last token comes from the cache.
            n = len(events(page, "llm-done"))
            page.locator("llm-chat .message.assistant").last.locator(".regenerate").click()
            again = done_after(page, n)["usage"]
            assert again["prompt_tokens"] == usage["prompt_tokens"]
            assert again["prompt_tokens_details"]["cached_tokens"] == again["prompt_tokens"] - 1, again
            assert page.locator("llm-chat .message.assistant").count() == 4  # replaced, not added
            assert page.locator("llm-chat .regenerate:visible").count() == 1

            # Edit the second question: the conversation is cut there; the cache holds up to the edit.
            n = len(events(page, "llm-done"))
            second = page.locator("llm-chat .message.user").nth(1)
            second.locator(".edit").click()
            second.locator(".editing textarea").fill("And of Portugal?")
            page.screenshot(path=shots / "editing.png")
            second.locator(".editing .save").click()
            edited = done_after(page, n)["usage"]
            first_turn = turns[0]["usage"]
            # Everything before the edited message (system prompt, first question and answer) was reused; the
            # edited question and what follows were computed.
            assert first_turn["prompt_tokens"] <= edited["prompt_tokens_details"]["cached_tokens"] < \
                edited["prompt_tokens"], edited
            history = page.eval_on_selector("llm-chat", "el => el.history")
            assert [m["content"] for m in history if m["role"] == "user"] == ["Capital of France?", "And of Portugal?"]
            assert len(history) == 4 and page.locator("llm-chat .message").count() == 4
            saved = json.loads(page.evaluate("localStorage.getItem(Object.keys(localStorage)[0])"))
            assert saved["messages"] == history
            # The element's storage panel shows the kept cache; reset() forgets it with the text.
            page.eval_on_selector("llm-chat", "el => el.showStorage()")
            assert "Kept conversation caches" in page.locator("llm-chat .storage").inner_text()
            assert page.locator("llm-chat .delete-conversations").is_visible()
            page.eval_on_selector("llm-chat", "el => el.reset()")
            deadline = time.monotonic() + 30
            while chat_files(page) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert chat_files(page) == []
        finally:
            context.close()


def test_what_a_call_leaves_out_gets_the_browser_defaults_through_an_endpoint_too(launch_profile, remote, tmp_path):
    """web/request-defaults.js: greedy and 256 tokens for a request that leaves them out, through an endpoint as on
    the device (whose replies the other browser tests compare with the native engine's greedy tokens): the element
    with neither attribute set, and a JS API call with its own temperature."""
    context = _launch(launch_profile, tmp_path / "profile")
    page = context.new_page()
    page.goto(f"{remote.url}/forget.html")
    wait_event(page, "llm-ready")
    before = len(remote.remote_bodies)
    page.locator("llm-chat textarea").fill("Hi")
    page.locator("llm-chat button.send").click()
    wait_event(page, "llm-done")
    sent = remote.remote_bodies[before:]
    assert [(b["temperature"], b["max_tokens"]) for b in sent] == [(0, 256)], sent
    page.evaluate("""async (endpoint) => {
      const { createEngine } = await import("/llm-chat.js");
      const engine = await createEngine({ endpoint, mode: "remote" });
      await engine.chat.completions.create({ messages: [{ role: "user", content: "Hi" }], temperature: 0.5 });
    }""", f"{remote.url}/v1")
    assert (remote.remote_bodies[-1]["temperature"], remote.remote_bodies[-1]["max_tokens"]) == (0.5, 256)
    context.close()
