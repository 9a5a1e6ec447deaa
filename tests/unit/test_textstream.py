"""The text stream (llmchat.chat.textstream): text comes out as whole characters, held back while it could still
be the start of a stop string, and cut at the first stop."""
from __future__ import annotations

import pytest

from llmchat.chat.textstream import TextStream
from llmchat.gguf.file import open_gguf
from llmchat.tokenizer.tokenizer import Tokenizer
from model_factory import write_model

@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = write_model(tmp_path_factory.mktemp("tiny") / "tiny.gguf")
    with open_gguf(str(path)) as g:
        return Tokenizer.from_metadata(g.metadata)


def _run(stream: TextStream, tokenizer: Tokenizer, text: str) -> list[str]:
    return [stream.push(t) for t in tokenizer.encode(text)]


def test_text_stream_holds_back_a_possible_stop(tokenizer):
    stream = TextStream(tokenizer, ["END"])
    pieces = _run(stream, tokenizer, "abc EN")
    assert "".join(pieces) == "abc " and not stream.stopped  # "EN" may still become "END"
    assert stream.close() == "EN"


def test_text_stream_cuts_at_the_first_stop(tokenizer):
    stream = TextStream(tokenizer, ["zz", "c d"])
    pieces = _run(stream, tokenizer, "abc def zz")
    assert "".join(pieces) == "ab" and stream.stopped
    assert stream.push(tokenizer.encode("x")[0]) == "" and stream.close() == ""


def test_text_stream_without_stops_and_split_characters(tokenizer):
    stream = TextStream(tokenizer)
    ids = tokenizer.encode("é!")  # two byte tokens for é: nothing comes out until the character is whole
    assert len(ids) == 3
    assert [stream.push(t) for t in ids] == ["", "é", "!"]
    stream = TextStream(tokenizer)
    assert stream.push(ids[0]) == "" and stream.close() == "\ufffd"
