"""The browser tests' Chromium: Debian's /usr/bin/chromium with WebGPU on (SwiftShader where there is no GPU),
driven through pytest-playwright's fixtures (tests/conftest.py). Playwright's own browser download (`playwright
install`) is never used."""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"]
BROWSER_TIMEOUT_MS = 120_000  # a cold load is ~10 s and a short reply ~15 s on SwiftShader with 2 cores
VIEWPORT = {"width": 900, "height": 640}
WEB = ROOT / "web"

# Events of the element (they bubble out of its shadow root), kept per page for the tests to read.
RECORDER = """
window.__events = [];
for (const type of ["llm-progress", "llm-ready", "llm-token", "llm-done", "llm-error"]) {
  document.addEventListener(type, (event) => window.__events.push([type, event.detail]));
}
"""


def events(page, type_: str) -> list[dict]:
    return [detail for kind, detail in page.evaluate("window.__events") if kind == type_]


def wait_event(page, type_: str, *, after: int = 0, timeout: int = BROWSER_TIMEOUT_MS) -> dict:
    """The first `type_` event after the first `after` of its kind; an llm-error fails the wait at once."""
    page.wait_for_function(
        """([type, after]) => window.__events.filter(e => e[0] === type).length > after ||
                             window.__events.some(e => e[0] === "llm-error")""", arg=[type_, after], timeout=timeout)
    errors = events(page, "llm-error")
    assert not errors, errors
    return events(page, type_)[after]


def read_opfs(page, name: str) -> str:
    """The text of file `name` at the top of the page origin's OPFS."""
    return page.evaluate("""async (name) => {
        const root = await navigator.storage.getDirectory();
        return await (await (await root.getFileHandle(name)).getFile()).text();
    }""", name)


def write_opfs(page, name: str, data: str | bytes) -> None:
    """Write `data` as file `name` at the top of the page origin's OPFS, replacing what was there."""
    page.evaluate("""async ([name, data, binary]) => {
        const root = await navigator.storage.getDirectory();
        const file = await (await root.getFileHandle(name, { create: true })).createWritable();
        await file.write(binary ? new Uint8Array(data) : data);
        await file.close();
    }""", [name, list(data) if isinstance(data, bytes) else data, isinstance(data, bytes)])


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (`tools/build/system-deps.sh test`, run by make test, installs it)"
    if not (ROOT / "web" / "dist" / "pyodide" / "pyodide-lock.json").exists():
        return "web/dist is not built (make web)"
    return None


def open_profile(browser_type, launch_args: dict, context_args: dict, profile: Path, *, webgpu: bool = True,
                 init_scripts: tuple[str, ...] = ()):
    """A browser on a profile folder of its own (persistent storage: OPFS, caches, service workers, which a test
    may fill and reopen), with the launch options of pytest-playwright's `browser`. `webgpu=False` removes WebGPU
    from its pages, as most browsers on Linux still lack it."""
    context = browser_type.launch_persistent_context(str(profile), **launch_args, **context_args)
    for script in init_scripts:
        context.add_init_script(script)
    if not webgpu:
        context.add_init_script("delete Navigator.prototype.gpu;")
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    return context


def generate_script(prompt: str, tokens: int = 4) -> str:
    """Page script defining `generate(model, options)`: a fresh engine (context 128, plus `options`) makes `tokens`
    greedy tokens of `prompt`, stops, and returns their ids with `engine.info` — what the browser's side of a
    browser-against-native comparison needs."""
    return """
  window.generate = async (model, options = {}) => {
    const engine = await api.createEngine({ model, context: 128, ...options });
    const ids = [];
    for await (const chunk of await engine.completions.create(
        { prompt: %s, max_tokens: %d, stream: true, ignore_eos: true })) {
      if (chunk.llmchat?.token != null) ids.push(chunk.llmchat.token);
    }
    engine.terminate();
    return { ids, info: engine.info };
  };""" % (json.dumps(prompt), tokens)


def native_greedy(path: Path, prompt: str, tokens: int, **options) -> list[int]:
    """The same greedy tokens from the native engine, the reference for `generate_script`'s."""
    from llmchat.api import LLM
    llm = LLM(str(path), context=128, **options)
    try:
        return [e.token for e in llm.generate(prompt, max_tokens=tokens, ignore_eos=True) if e.token is not None]
    finally:
        llm.runtime.device.close()
