"""Hugging Face references without a network: the grammar, the URL rule and which file a reference means.

The cases live in tests/data/hub_references.json so that web/hub.js is held to exactly the same answers
(tests/unit/test_web_hub.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmchat.errors import ModelNotFoundError
from llmchat.hub.refs import HubRef, choose_files, file_url, hub_endpoint, listing_url, parse_reference

CASES = json.loads((Path(__file__).parents[1] / "data" / "hub_references.json").read_text(encoding="utf-8"))


def _ref(case: dict) -> dict | None:
    ref = parse_reference(case["text"])
    return None if ref is None else {"repo": ref.repo, "revision": ref.revision, "file": ref.file, "quant": ref.quant}


@pytest.mark.parametrize("case", CASES["parse"], ids=lambda c: c["text"])
def test_parse(case: dict) -> None:
    if "error" in case:
        with pytest.raises(ModelNotFoundError, match=case["error"]):
            parse_reference(case["text"])
    else:
        assert _ref(case) == case["ref"]


@pytest.mark.parametrize("case", CASES["urls"], ids=lambda c: c["ref"])
def test_file_url(case: dict) -> None:
    ref = parse_reference(case["ref"])
    assert ref is not None and ref.file is not None
    assert file_url(ref, ref.file, case["endpoint"]) == case["url"]


@pytest.mark.parametrize("case", CASES["choose"], ids=lambda c: f"{c['ref']} {c.get('error', '')}")
def test_choose(case: dict) -> None:
    ref = parse_reference(case["ref"])
    assert ref is not None
    if "error" in case:
        with pytest.raises(ModelNotFoundError, match=case["error"]) as caught:
            choose_files(ref, case["files"])
        for listed in case["lists"]:
            assert listed in str(caught.value)
    else:
        assert choose_files(ref, case["files"]) == case["chosen"]


def test_references_print_back_as_hf_uris() -> None:
    for text in ("hf://org/repo/sub/m.gguf", "hf://org/repo/m.gguf@v2", "hf://org/repo:Q8_0"):
        ref = parse_reference(text)
        assert str(ref) == text and parse_reference(str(ref)) == ref
    assert str(parse_reference("hf.co/org/repo")) == "hf://org/repo:Q4_K_M"


def test_listing_url_and_endpoint() -> None:
    assert listing_url(HubRef("org/repo", "refs/pr/1"), "http://h:1/") == "http://h:1/api/models/org/repo/revision/refs%2Fpr%2F1"
    assert hub_endpoint({}) == "https://huggingface.co"
    assert hub_endpoint({"HF_ENDPOINT": "https://mirror.example/"}) == "https://mirror.example"


def test_the_error_tells_how_to_name_a_file() -> None:
    with pytest.raises(ModelNotFoundError) as caught:
        choose_files(HubRef("org/repo", quant="Q2_K"), ["m-Q4_K_M.gguf", "Big-00001-of-00002.gguf",
                                                         "Big-00002-of-00002.gguf"])
    message = str(caught.value)
    assert "org/repo has no GGUF file for quantization Q2_K" in message
    assert "Big-00001-of-00002.gguf (+1 more shard)" in message
    assert "ORG/REPO:QUANT or hf://ORG/REPO/FILE.gguf" in message


def test_core_works_without_huggingface_hub(tmp_path: Path) -> None:
    """huggingface_hub is a native extra: without it the core imports, lists its own cache, and says what a hub
    reference needs."""
    script = (
        "import sys; sys.modules['huggingface_hub'] = None\n"  # `import huggingface_hub` fails as if not installed
        "from llmchat.cli import main\n"
        "assert main(['list', '--json']) == 0\n"
        "raise SystemExit(main(['pull', 'org/repo:Q4_K_M']))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**os.environ, "LLMCHAT_HOME": str(tmp_path)})
    assert result.returncode == 2, result.stderr
    assert result.stdout.strip() == "[]"
    assert "need the huggingface_hub package: pip install huggingface_hub" in result.stderr


@pytest.mark.skipif(sys.platform != "emscripten", reason="the browser branch of resolve (runs inside Pyodide)")
def test_inside_pyodide_references_resolve_to_hub_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmchat.hub.catalogue import resolve

    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example")
    assert resolve("hf://org/repo/m-Q8_0.gguf@v1") == "https://mirror.example/org/repo/resolve/v1/m-Q8_0.gguf"
    assert resolve("gemma3-1b") == \
        "https://mirror.example/ggml-org/gemma-3-1b-it-GGUF/resolve/main/gemma-3-1b-it-Q4_K_M.gguf"
    with pytest.raises(ModelNotFoundError, match="in the browser, name the file"):
        resolve("org/repo:Q4_K_M")
