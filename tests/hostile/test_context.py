"""The context size, by one rule for `llmchat run|chat|...|serve --ctx`, and the API's `context=`
(llmchat.runtime.memory.context_size): a positive number of tokens, refused otherwise before anything loads; by default
2048 or the trained length when shorter; a longer one than the model was trained for runs as asked, with a
warning that says so (as llama.cpp does), never silently lowered."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from model_factory import write_model

from llmchat.api import LLM
from llmchat.cli import build_parser, main
from llmchat.errors import ContextLengthWarning, InvalidRequestError
from llmchat.runtime.memory import DEFAULT_CONTEXT, context_size
from llmchat.server.runner import ServeConfig


@pytest.mark.parametrize("command", ["run", "chat", "logits", "perplexity", "bench", "serve"])
@pytest.mark.parametrize("value", ["0", "-5", "abc", "1.5"])
def test_a_context_that_is_not_positive_is_a_usage_error(capsys, command: str, value: str) -> None:
    extra = {"run": ["-p", "x"], "logits": ["-p", "x"], "perplexity": ["--file", "f"]}.get(command, [])
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([command, "no-such-model.gguf", "--ctx", value, *extra])
    assert e.value.code == 2
    assert "--ctx" in capsys.readouterr().err


@pytest.mark.parametrize("value", [0, -5, True, 2.5])
def test_the_api_refuses_a_bad_context_before_opening_anything(value) -> None:
    with pytest.raises(InvalidRequestError, match="context must be a positive number of tokens"):
        LLM("/no/such/file.gguf", context=value)


def test_the_default_is_2048_or_the_trained_length() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert context_size(None, 8192) == DEFAULT_CONTEXT == 2048
        assert context_size(None, 512) == 512
        assert context_size(512, 512) == 512
        assert context_size(100, 512) == 100


def test_beyond_the_trained_length_runs_as_asked_with_a_warning() -> None:
    with pytest.warns(ContextLengthWarning, match="m.gguf: running with a context of 1024 tokens as asked, longer "
                                                  "than the 512 the model was trained for"):
        assert context_size(1024, 512, "m.gguf") == 1024


def test_serve_takes_the_same_default_and_the_same_rule() -> None:
    ServeConfig(model="m").validate()  # ctx None: the shared default
    ServeConfig(model="m", ctx=8).validate()  # a short context serves as it loads elsewhere
    for value in (0, -5, True, 2.5):
        with pytest.raises(InvalidRequestError, match="context must be a positive number of tokens"):
            ServeConfig(model="m", ctx=value).validate()


@pytest.mark.gpu
def test_cli_run_beyond_the_trained_length_warns_once_on_stderr(tmp_path: Path, capsys) -> None:
    path = write_model(tmp_path / "tiny.gguf", context_length=64)
    assert main(["run", str(path), "-p", "hello", "-n", "2", "--ctx", "128"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert err == [f"llmchat: warning: {path}: running with a context of 128 tokens as asked, longer than the 64 the "
                   "model was trained for (its context_length); text beyond 64 tokens may degrade"]
