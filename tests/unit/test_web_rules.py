"""Rules the browser code takes from Python, or keeps in one module of its own, rather than repeating: the context
default (Python's llmchat.runtime.memory.context_size: 2048, or the model's trained length when shorter) is never
written in web/, so a page that names no context gets Python's rule; gguf-split's shard names are read by
web/shards.js alone, as core/gguf/file.py reads them; what a request that leaves out its temperature or length gets
is web/request-defaults.js's, on the device and through an endpoint."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from llmchat.gguf.file import shard_name, shard_number
from llmchat.runtime.memory import DEFAULT_CONTEXT

WEB = Path(__file__).resolve().parents[2] / "web"


def test_the_context_default_is_pythons_alone():
    for path in sorted(WEB.glob("*.js")) + sorted(WEB.glob("*.html")):
        text = path.read_text(encoding="utf-8")
        assert not re.search(rf"\b{DEFAULT_CONTEXT}\b", text), f"{path.name} repeats the context default"


SHARD_CASES = ["m-00001-of-00003.gguf", "dir/big-Q4_K_M-00002-of-00002.gguf", "plain.gguf", "m-1-of-3.gguf",
               "https://cdn.example/a/m-00003-of-00010.gguf?x=1#f", "https://cdn.example/a/plain.gguf",
               "m-00001-of-00003.gguf.part", "/models/SmolLM2-135M-Instruct.Q4_1.gguf"]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_shard_names_are_read_as_python_reads_them():
    """web/shards.js, the browser's one reading of gguf-split's names, gives core/gguf/file.py's answers."""
    script = ("import { shardName, shardNumber } from %s;\n"
              "const cases = %s;\n"
              "console.log(JSON.stringify(cases.map((c) => [shardNumber(c), shardName(c, 1, 7)])));"
              % (json.dumps((WEB / "shards.js").as_uri()), json.dumps(SHARD_CASES)))
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    want = [[list(n) if (n := shard_number(c)) else None, shard_name(c, 1, 7)] for c in SHARD_CASES]
    assert json.loads(out) == want


def test_the_shard_pattern_is_written_once_in_the_browser_code():
    # The pattern's pieces: its five digits (`\d{5}`), or a name built with "-of-" around a number.
    writing = [p.name for p in WEB.glob("*.js")
               if re.search(r"\\d\{5\}|-of-\$\{", p.read_text(encoding="utf-8"))]
    assert writing == ["shards.js"]


DEFAULT_CASES = [  # (asked, filled)
    ({}, {"temperature": 0, "max_tokens": 256}),
    ({"temperature": None, "max_tokens": None}, {"temperature": 0, "max_tokens": 256}),
    ({"temperature": 0.7, "max_tokens": 8, "stream": True}, {"temperature": 0.7, "max_tokens": 8, "stream": True}),
    ({"max_completion_tokens": 5}, {"temperature": 0, "max_completion_tokens": 5}),
]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_request_gets_the_browser_defaults_for_what_it_leaves_out_and_keeps_the_rest():
    script = ("import { withDefaults } from %s;\n"
              "console.log(JSON.stringify(%s.map((c) => withDefaults(c))));"
              % (json.dumps((WEB / "request-defaults.js").as_uri()), json.dumps([a for a, _ in DEFAULT_CASES])))
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert json.loads(out) == [want for _, want in DEFAULT_CASES]


def test_the_request_defaults_are_written_once():
    """The element passes only the attributes it was given, the engine fills in the rest for both of its modes, and
    the Python side of the page keeps no defaults of its own (it reads a request as the server does)."""
    fallback = re.compile(r'#number\("(?:max-tokens|temperature)", \d|max_tokens: 256\b|temperature: \d')
    repeating = [p.name for p in WEB.glob("*.js")
                 if p.name != "request-defaults.js" and fallback.search(p.read_text(encoding="utf-8"))]
    assert repeating == []
    browser = (WEB.parent / "core" / "browser" / "runtime.py").read_text(encoding="utf-8")
    assert "Defaults(" not in browser and "defaults=" not in browser


def test_no_web_module_is_over_600_lines():
    long = {p.name: n for p in WEB.glob("*.js") if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert not long, long


def test_the_offline_shell_holds_every_module_the_pages_import():
    """The service worker's app shell (sw.js SHELL) lists every module another imports, so a second visit works
    offline."""
    shell = set(re.findall(r'"([\w.-]+)"', re.search(r"const SHELL = \[(.*?)\];", (WEB / "sw.js").read_text(),
                                                      re.S)[1]))
    imported = {name for p in WEB.glob("*.js")
                for name in re.findall(r'from "\./([\w.-]+\.js)"', p.read_text(encoding="utf-8"))}
    assert imported and imported <= shell, imported - shell


def test_messages_between_page_worker_and_tabs_are_named_in_one_module():
    """engine.js, worker.js and engine-link.js build and read their messages with messages.js's names: no message
    type is written as a string literal of their own (comments aside)."""
    names = set(re.findall(r'(\w+): "\1"', (WEB / "messages.js").read_text(encoding="utf-8")))
    assert {"load", "chat", "stop", "chunk", "done", "error", "connect", "bye", "leader"} <= names
    for name in ("engine.js", "worker.js", "engine-link.js"):
        code = "\n".join(line for line in (WEB / name).read_text(encoding="utf-8").splitlines()
                         if not line.lstrip().startswith("//"))
        literal = re.findall(r'(?:type: |type [!=]== |case |to: |\.to [!=]== )"(\w+)"', code)
        assert not names & set(literal), (name, sorted(names & set(literal)))
