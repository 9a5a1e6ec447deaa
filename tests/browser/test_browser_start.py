"""When the browser runtime starts: `<llm-chat>` out of sight loads nothing until it shows, unless it has the
`preload` attribute; `createEngine({preload: true})` resolves before the engine is ready. Remote mode (the test
server's fake /v1) and a missing model keep these quick: what is checked is when each engine starts."""
from __future__ import annotations

from pathlib import Path

import pytest

from browser_server import WebServer
from browser_util import WEB

PAGE = """<!doctype html><script type="module" src="/llm-chat.js"></script>
<script>
  window.ready = [];
  document.addEventListener("llm-ready", (event) => window.ready.push(event.target.id));
</script>
<llm-chat id="top" mode="remote" endpoint="/v1"></llm-chat>
<div style="height: 5000px"></div>
<llm-chat id="below" mode="remote" endpoint="/v1"></llm-chat>
<llm-chat id="preloaded" mode="remote" endpoint="/v1" preload></llm-chat>
<llm-chat id="hidden" mode="remote" endpoint="/v1" hidden></llm-chat>"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with WebServer(WEB, tmp_path_factory.mktemp("models")) as srv:
        srv.pages["/start.html"] = PAGE
        yield srv


def test_an_element_out_of_sight_starts_when_it_shows_unless_preloaded(server, page):
    page.goto(f"{server.url}/start.html")
    page.wait_for_function("window.ready.includes('top') && window.ready.includes('preloaded')")
    page.wait_for_timeout(500)  # time for an engine that should not start to show that it did
    assert sorted(page.evaluate("window.ready")) == ["preloaded", "top"]
    page.locator("#below").scroll_into_view_if_needed()
    page.wait_for_function("window.ready.includes('below')")
    page.eval_on_selector("#hidden", "el => el.setAttribute('preload', '')")
    page.wait_for_function("window.ready.includes('hidden')")


def test_create_engine_with_preload_resolves_before_the_load_ends(server, page):
    """A model that is not there: without preload createEngine rejects; with it, createEngine resolves with an
    engine that is loading, whose `ready` then rejects with the same error."""
    page.goto(f"{server.url}/start.html")
    result = page.evaluate("""async () => {
        const { createEngine } = await import("/llm-chat.js");
        const options = { model: "/models/missing.gguf" };
        const plain = await createEngine(options).then(() => "resolved", (error) => error.code);
        const engine = await createEngine({ ...options, preload: true });
        const loading = engine.info === null;
        const ready = await engine.ready.then(() => "resolved", (error) => error.code);
        engine.terminate();
        return { plain, loading, ready };
    }""")
    assert result == {"plain": "not-found", "loading": True, "ready": "not-found"}
