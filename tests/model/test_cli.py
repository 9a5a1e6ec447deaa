"""The `llmchat` command line, run for real in a subprocess (`python -m llmchat`, what the script calls)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_util import llmchat, ok, one_line_error
from llmchat.cli import COMMANDS
from llmchat.hub.catalogue import CATALOGUE

DATA = Path(__file__).parents[1] / "data"
GOLDEN = json.loads((DATA / "smollm2-135m-instruct-q4_1.json").read_text(encoding="utf-8"))
GOLDEN_IDS = {case["text"]: case["ids"] for case in GOLDEN["tokenize"]}
CHAT_PROMPT = next(case for case in GOLDEN["prompts"] if case["text"].startswith("<|im_start|>"))


@pytest.mark.model
@pytest.mark.parametrize(
    "text",
    [
        "Hello world",
        "naïve café résumé coöperate",
        "emoji 😀👍🏽🇫🇷 👨‍👩‍👧‍👦 done",
        "<|im_start|>user\nhi<|im_end|>",
        "",
    ],
)
def test_tokenize_prints_the_golden_ids(smollm2_path: Path, text: str) -> None:
    assert text in GOLDEN_IDS, "the golden data no longer has this string"
    assert ok(llmchat("tokenize", str(smollm2_path), "--text", text)) == " ".join(map(str, GOLDEN_IDS[text])) + "\n"


@pytest.mark.model
def test_tokenize_json_by_catalogue_name(smollm2_path: Path) -> None:
    text = "def f(x):\n    return x ** 2  # square\n"
    assert json.loads(ok(llmchat("tokenize", "smollm2", "--text", text, "--json"))) == {"ids": GOLDEN_IDS[text]}


@pytest.mark.model
def test_tokenize_special_tokens_and_bos(smollm2_path: Path) -> None:
    special = llmchat("tokenize", str(smollm2_path), "--text", CHAT_PROMPT["text"], "--parse-special", "--json")
    assert json.loads(ok(special)) == {"ids": CHAT_PROMPT["ids"]}
    with_bos = ok(llmchat("tokenize", str(smollm2_path), "--text", "Hello world", "--add-bos")).split()
    assert [int(i) for i in with_bos] == [1, *GOLDEN_IDS["Hello world"]]  # tokenizer.ggml.bos_token_id is 1


@pytest.mark.model
def test_chat_template_prints_the_prompt(smollm2_path: Path) -> None:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the boiling point of water at sea level?"},
    ]
    assert ok(llmchat("chat-template", str(smollm2_path), "--messages", json.dumps(messages))) == CHAT_PROMPT["text"]
    from_stdin = llmchat("chat-template", str(smollm2_path), "--messages", "-", "--no-generation-prompt",
                         stdin=json.dumps(messages))
    assert ok(from_stdin) == CHAT_PROMPT["text"].removesuffix("<|im_start|>assistant\n")


@pytest.mark.model
def test_chat_template_refuses_bad_messages(smollm2_path: Path) -> None:
    bad_role = '[{"role": "usr", "content": "x"}]'
    line = one_line_error(llmchat("chat-template", str(smollm2_path), "--messages", bad_role))
    assert "unknown role 'usr'" in line
    usage = llmchat("chat-template", str(smollm2_path), "--messages", "[{")
    assert usage.returncode == 2 and "--messages: not valid JSON" in usage.stderr


@pytest.mark.model
def test_inspect_summarises_the_model(smollm2_path: Path) -> None:
    text = ok(llmchat("inspect", str(smollm2_path)))
    assert "llama" in text and "token_embd.weight" not in text  # the tensor table only with --tensors
    assert "  0  token_embd.weight  " in ok(llmchat("inspect", str(smollm2_path), "--tensors"))
    summary: Any = json.loads(ok(llmchat("inspect", str(smollm2_path), "--json")))
    assert "llama" in json.dumps(summary)


@pytest.mark.model
def test_pull_prints_the_cached_path(smollm2_path: Path, tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    cached = models / CATALOGUE["smollm2"].file_name
    cached.symlink_to(smollm2_path)  # a valid cache entry, so nothing is downloaded
    for flags in ([], ["--verify"]):
        result = llmchat("pull", "smollm2", *flags, env={"LLMCHAT_HOME": str(tmp_path)})
        assert ok(result) == f"{cached}\n"
        assert result.stderr == ""


def test_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    line = one_line_error(llmchat("pull", "no-such-model", env={"LLMCHAT_HOME": str(tmp_path)}))
    assert "'no-such-model'" in line and "`llmchat list --catalogue`" in line and "did you mean" not in line
    assert len(line) < 250  # the catalogue is listed by the command the line names, not in the line
    typo = one_line_error(llmchat("pull", "SmolM2", env={"LLMCHAT_HOME": str(tmp_path)}))
    assert "did you mean smollm2, smollm2-360m or smollm2-1.7b?" in typo
    missing = str(tmp_path / "missing.gguf")
    assert "does not exist" in one_line_error(llmchat("tokenize", missing, "--text", "x"))
    assert "does not exist" in one_line_error(llmchat("inspect", missing, "--json"))


def test_list_catalogue_names_every_catalogue_model(tmp_path: Path) -> None:
    rows = ok(llmchat("list", "--catalogue", env={"LLMCHAT_HOME": str(tmp_path)})).splitlines()
    assert rows[0].split() == ["NAME", "SIZE", "DESCRIPTION"]
    assert [row.split()[0] for row in rows[1:]] == list(CATALOGUE)
    listed = json.loads(ok(llmchat("list", "--catalogue", "--json")))
    assert [(m["name"], m["size"]) for m in listed] == [(e.name, e.size) for e in CATALOGUE.values()]


def test_not_a_gguf_file_is_a_clean_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"this is not a model" * 10)
    one_line_error(llmchat("tokenize", str(junk), "--text", "x"))


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    for args in (["--debug", "pull", "no-such-model"], ["pull", "no-such-model", "--debug"]):
        result = llmchat(*args, env={"LLMCHAT_HOME": str(tmp_path)})
        assert result.returncode == 2
        assert "Traceback (most recent call last)" in result.stderr
        assert result.stderr.rstrip().splitlines()[-1].startswith("llmchat: error: ")


def test_help_lists_the_commands() -> None:
    text = ok(llmchat("--help"))
    for name in ("pull", "inspect", "tokenize", "chat-template"):
        assert name in text
    bare = llmchat()  # a command is required, and bare `llmchat` lists them
    assert bare.returncode == 2 and all(name in bare.stderr for name in COMMANDS), bare.stderr


def test_an_unknown_option_is_named_with_its_command_s_usage() -> None:
    result = llmchat("run", "smollm2", "-p", "hi", "--tokens", "4")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("usage: llmchat run ") and "[-n MAX_TOKENS]" in result.stderr
    assert result.stderr.rstrip().endswith("llmchat run: error: unrecognized arguments: --tokens 4")
    top = llmchat("--tokens")
    assert top.returncode == 2 and top.stderr.rstrip().endswith("llmchat: error: unrecognized arguments: --tokens")
