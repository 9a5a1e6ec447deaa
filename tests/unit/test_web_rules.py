"""Rules the browser code takes from Python rather than repeating: the context default (Python's
llmchat.runtime.memory.context_size: 2048, or the model's trained length when shorter) is never written in web/, so
a page that names no context gets Python's rule."""
from __future__ import annotations

import re
from pathlib import Path

from llmchat.runtime.memory import DEFAULT_CONTEXT

WEB = Path(__file__).resolve().parents[2] / "web"


def test_the_context_default_is_pythons_alone():
    for path in sorted(WEB.glob("*.js")) + sorted(WEB.glob("*.html")):
        text = path.read_text(encoding="utf-8")
        assert not re.search(rf"\b{DEFAULT_CONTEXT}\b", text), f"{path.name} repeats the context default"
