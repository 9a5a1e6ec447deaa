"""A reply that ends inside a UTF-8 character — cut by max_tokens, by an end-of-generation token, or next to a
stop string — ends the same way from the Python API and from the server: both take the text from the one
generation loop (llmchat.runtime.generation.Generation → llmchat.chat.textstream.TextStream), whose end turns the
unfinished character into U+FFFD.

The token ids below are SmolLM2-135M-Instruct's greedy continuations of the prompts (found by running it); they
are fixed data here, so the text-stream cases need the tokenizer only. One end-to-end pair runs the model through
`LLM.generate` and through `llmchat serve`.
"""
from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from server_util import running_server

from llmchat.gguf.file import open_gguf
from llmchat.chat.textstream import TextStream
from llmchat.tokenizer.tokenizer import Tokenizer
from gpu_util import adapter_gpu  # noqa: F401 (a fixture)

pytestmark = pytest.mark.model

EMOJI_PROMPT = "Emoji for happy: 😀, emoji for sad:"
CJK_PROMPT = "中文：你好，世界。日本語："
# greedy continuations: ' 👌, emoji for angry: 👐' and '日本語－－－', several tokens per character
EMOJI_IDS = [15107, 235, 230, 28, 649, 33777, 327, 12575, 42, 15107, 235, 234]
CJK_IDS = [23274, 115, 40993, 179, 120, 248, 8083, 231, 8083, 231, 8083, 231]
KANA_IDS = [216, 10391, 227, 10391, 227, 7365, 233, 30, 198, 198, 504, 4931]  # ' ららく.\n\nThe Japanese'


@pytest.fixture(scope="module")
def tokenizer(smollm2_path: Path) -> Tokenizer:
    with open_gguf(smollm2_path) as f:
        return Tokenizer.from_metadata(f.metadata)


def _stream(tokenizer: Tokenizer, ids: list[int], stops=()) -> tuple[str, bool]:
    """The whole text one sequence produces from `ids` (pieces, then the end), and whether a stop ended it."""
    stream = TextStream(tokenizer, stops)
    pieces = [stream.push(t) for t in ids]
    stopped = stream.stopped
    return "".join(pieces) + stream.close(), stopped


def _raw(tokenizer: Tokenizer, ids: list[int]) -> bytes:
    return b"".join(tokenizer.token_bytes(t) for t in ids)


@pytest.mark.parametrize("ids", [EMOJI_IDS, CJK_IDS, KANA_IDS], ids=["emoji", "cjk", "kana"])
def test_every_cut_ends_as_the_bytes_decode_with_replacement(tokenizer: Tokenizer, ids: list[int]) -> None:
    cut_inside = 0
    for n in range(1, len(ids) + 1):
        raw = _raw(tokenizer, ids[:n])
        text, _ = _stream(tokenizer, ids[:n])
        assert text == raw.decode("utf-8", errors="replace"), n
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            cut_inside += 1
            assert text.endswith("\ufffd") and text.count("\ufffd") == 1, (n, text)
    assert cut_inside >= 2  # the data does cut inside characters


@pytest.mark.parametrize("ids, stop, expected", [
    (EMOJI_IDS, "👌", " "),  # the stop is three tokens, the first two of them parts of one character
    (EMOJI_IDS, "👐", " 👌, emoji for angry: "),  # ... and the text ends with the character it would have begun
    (EMOJI_IDS, ", emoji", " 👌"),  # a stop right after a character made of several tokens
    (CJK_IDS, "本語", "日"),  # a stop beginning inside one multi-character token
    (CJK_IDS, "語－", "日本"),
    (KANA_IDS, "らく", " ら"),
    (KANA_IDS, ".\n\nThe", " ららく"),
])
def test_stop_strings_over_split_characters(tokenizer: Tokenizer, ids: list[int], stop: str, expected: str) -> None:
    text, stopped = _stream(tokenizer, ids, [stop])
    assert stopped and text == expected


@pytest.mark.parametrize("n", [2, 11])
def test_a_stop_that_never_comes_does_not_hide_the_unfinished_character(tokenizer: Tokenizer, n: int) -> None:
    # A held-back prefix of a stop string and an unfinished character both come out at the end.
    text, stopped = _stream(tokenizer, EMOJI_IDS[:n], ["\ufffd never"])
    assert not stopped and text == _raw(tokenizer, EMOJI_IDS[:n]).decode("utf-8", errors="replace")


@pytest.mark.gpu
def test_the_api_and_the_server_end_a_split_character_alike(smollm2_path: Path, adapter_gpu) -> None:  # noqa: F811
    from llmchat.api import LLM

    cases = [(EMOJI_PROMPT, 1, []), (EMOJI_PROMPT, 2, []), (EMOJI_PROMPT, 11, []), (CJK_PROMPT, 4, []),
             (CJK_PROMPT, 12, ["－－－"]), (EMOJI_PROMPT, 12, ["👐"])]
    llm = LLM(str(smollm2_path), context=256, device=adapter_gpu.device)
    api = []
    for prompt, n, stop in cases:
        events = list(llm.generate(prompt, max_tokens=n, stop=stop))
        api.append(("".join(e.text for e in events), events[-1].finish_reason))
    # the model still continues as when the ids above were found: each of the first four ends inside a character
    assert all(text.endswith("\ufffd") and reason == "length" for text, reason in api[:4]), api
    with running_server(smollm2_path, ["--ctx", "256", "--max-batch", "2"]) as base:
        for (prompt, n, stop), expected in zip(cases, api):
            body = {"model": smollm2_path.name, "prompt": prompt, "max_tokens": n, "temperature": 0,
                    "stop": stop or None}
            whole = httpx.post(f"{base}/v1/completions", json=body, timeout=120).json()["choices"][0]
            assert (whole["text"], whole["finish_reason"]) == expected, (prompt, n, stop)
            with httpx.stream("POST", f"{base}/v1/completions", json=body | {"stream": True}, timeout=120) as r:
                chunks = [json.loads(line[6:]) for line in r.iter_lines()
                          if line.startswith("data: ") and line != "data: [DONE]"]
            streamed = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
            assert streamed == expected[0], (prompt, n, stop)
