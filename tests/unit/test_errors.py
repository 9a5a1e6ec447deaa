"""Errors carry their own meaning (llmchat.errors): every class llmchat raises on purpose says its HTTP status, the
code pages receive and, where OpenAI has one, OpenAI's code, once; the server answers and the browser reports by
them, and no second table of them exists."""
from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import llmchat
from llmchat.browser.runtime import error_code
from llmchat.errors import LLMChatError, error_class

ROOT = Path(__file__).resolve().parents[2]


def _every_error_class() -> list[type[LLMChatError]]:
    for module in pkgutil.walk_packages(llmchat.__path__, "llmchat."):
        if not module.name.startswith("llmchat.web") and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found, todo = [], [LLMChatError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_error_class_says_its_status_and_code():
    classes = _every_error_class()
    assert len(classes) > 20
    names = [cls.__name__ for cls in classes]
    assert len(names) == len(set(names))  # the browser finds a class by its name
    for cls in classes:
        assert 400 <= cls.status <= 599 and re.fullmatch(r"[a-z]+(-[a-z]+)*", cls.code), cls
        assert cls.api_code is None or re.fullmatch(r"[a-z_]+", cls.api_code), cls
        assert error_class(cls.__name__) is cls and error_code(cls.__name__) == cls.code


def test_the_codes_pages_have_known_stay_what_they_were():
    expected = {"ModelTooLargeError": "too-large", "UnsupportedModelError": "unsupported", "GGUFError": "bad-model",
                "SourceError": "network", "DeviceLostError": "device-lost", "ShaderError": "shader",
                "GPUError": "gpu", "ContextOverflowError": "context-overflow", "FieldError": "invalid-request",
                "InvalidRequestError": "invalid-request", "ChatTemplateError": "chat-template",
                "TokenizerError": "tokenizer", "GrammarError": "grammar", "UnsupportedSchemaError": "unsupported-schema",
                "TemplateBudgetError": "chat-template", "NoDocumentError": "grammar"}
    _every_error_class()
    assert {name: error_code(name) for name in expected} == expected
    assert error_code("ZeroDivisionError") == "python"  # not llmchat's own: a bug


def test_no_second_table_of_error_codes_in_the_browser_code():
    """No JS maps a Python error class to a code (`SomeError: "code"`); the worker asks Python (error_code)."""
    names = {cls.__name__ for cls in _every_error_class()}
    for path in (ROOT / "web").glob("*.js"):
        mapped = re.findall(r"\b(\w+Error)\s*:\s*[\"']", path.read_text(encoding="utf-8"))
        assert not names & set(mapped), (path.name, mapped)
