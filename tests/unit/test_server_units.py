"""Server parts that need no GPU: byte ranges, path checks, media types and the refusal of unsupported fields (the
text stream, the prefix cache and the metrics they serve have test files of their own)."""
from __future__ import annotations

import os

import pytest

from llmchat.protocol import RANGES
from llmchat.server.schemas import ChatCompletionRequest, CompletionRequest, unsupported_fields
from llmchat.server.static import folder_page, media_type, parse_ranges, safe_path

# -- Range headers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("header,size,expected", [
    ("bytes=0-3", 100, [(0, 3)]),
    ("bytes=10-", 100, [(10, 99)]),
    ("bytes=-10", 100, [(90, 99)]),
    ("bytes=-1000", 100, [(0, 99)]),  # a suffix longer than the file is the whole file
    ("bytes=90-1000", 100, [(90, 99)]),  # the last byte is clamped to the file
    ("bytes=0-1, 5-6", 100, [(0, 1), (5, 6)]),
    ("bytes=100-", 100, []),  # starts past the end: unsatisfiable
    ("bytes=200-300", 100, []),
    ("bytes=-0", 100, []),
    ("bytes=0-0", 0, []),  # nothing is satisfiable in an empty file
    ("bytes=200-300, 0-0", 100, [(0, 0)]),  # satisfiable if any part is
    ("bytes=5-2", 100, None),  # malformed headers are ignored: the whole file is sent
    ("bytes=-", 100, None),
    ("bytes=a-b", 100, None),
    ("bytes=1-²", 100, None),  # Unicode digits are not digits in HTTP
    ("items=0-3", 100, None),
    ("bytes=", 100, None),
    ("bytes=" + ",".join(["0-0"] * 17), 100, None),  # too many parts
])
def test_parse_ranges(header, size, expected):
    assert parse_ranges(header, size) == expected


# -- paths -------------------------------------------------------------------------------------------------------


def test_safe_path_stays_inside_its_root(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "sub" / "b.wasm").write_bytes(b"\0asm")
    (root / ".secret").write_text("s")
    (tmp_path / "outside.txt").write_text("o")
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    assert safe_path(root, "a.txt") == (root / "a.txt").resolve()
    assert safe_path(root, "sub/b.wasm") == (root / "sub" / "b.wasm").resolve()
    for bad in ["../outside.txt", "sub/../../outside.txt", "/etc/passwd", ".secret", "sub/..", "link.txt",
                "a.txt\x00", "sub\\b.wasm", "", "sub", "missing.txt", "./a.txt"]:
        assert safe_path(root, bad) is None, bad


def test_a_folder_page_lists_what_is_inside_and_nothing_outside(tmp_path):
    root = tmp_path / "pages"
    (root / "sub dir").mkdir(parents=True)
    (root / "a<b>.html").write_text("a")
    (root / ".secret").write_text("s")
    (root / "__pycache__").mkdir()
    page = folder_page(root, "", "/pages/")
    assert '<a href="a%3Cb%3E.html">a&lt;b&gt;.html</a>' in page and '<a href="sub%20dir/">sub dir/</a>' in page
    assert ".secret" not in page and "__pycache__" not in page and "<title>/pages/</title>" in page
    assert folder_page(root, "sub dir/", "/pages/sub dir/") is not None
    for bad in ["../", "a<b>.html", ".secret/", "missing/", "sub dir/../../"]:
        assert folder_page(root, bad, "/x/") is None, bad


@pytest.mark.parametrize("name,expected", [
    ("x.wasm", "application/wasm"), ("x.mjs", "text/javascript; charset=utf-8"),
    ("x.whl", "application/zip"), ("x.json", "application/json"),
    ("x.webmanifest", "application/manifest+json"), ("x.gguf", "application/octet-stream"),
    ("X.HTML", "text/html; charset=utf-8"), ("noext", "application/octet-stream"),
])
def test_media_types(tmp_path, name, expected):
    assert media_type(tmp_path / name) == expected


# -- schemas ------------------------------------------------------------------------------------------------------


def test_unsupported_fields_are_named_harmless_values_pass():
    base = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    assert unsupported_fields(ChatCompletionRequest(**base)) == []
    assert unsupported_fields(ChatCompletionRequest(**base, response_format={"type": "text"}, store=False,
                                                    logit_bias={}, tools=[])) == []
    assert unsupported_fields(ChatCompletionRequest(**base, tools=[{"type": "function"}],
                                                    response_format={"type": "json_object"})) == []
    assert unsupported_fields(ChatCompletionRequest(**base, functions=[{"name": "f"}], audio={"voice": "x"})) == \
        ["audio", "functions"]
    assert unsupported_fields(CompletionRequest(model="m", prompt="x", echo=True, suffix="s")) == ["echo", "suffix"]


def test_the_schema_publishes_the_protocols_ranges():
    properties = ChatCompletionRequest.model_json_schema()["properties"]
    for name in ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "n", "top_logprobs"):
        bounds = RANGES[name]
        numbers = next((p for p in properties[name].get("anyOf", [properties[name]]) if "minimum" in p))
        assert (numbers["minimum"], numbers.get("maximum")) == (bounds.low, bounds.high), name
