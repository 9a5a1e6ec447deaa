"""Turns of a conversation on an LLM, as the saved-chat tests take them."""
from __future__ import annotations

from llmchat.api import LLM

FIRST = [{"role": "user", "content": "hello there, how are the bees doing this fine morning?"}]


def reply(llm: LLM, messages: list[dict], max_tokens: int = 6) -> tuple[list[int], dict]:
    events = list(llm.chat(messages, max_tokens=max_tokens))
    return [e.token for e in events if e.token is not None], events[-1].usage


def follow_up(llm: LLM, tokens: list[int], text: str) -> list[dict]:
    return FIRST + [{"role": "assistant", "content": llm.tokenizer.decode(tokens)}, {"role": "user", "content": text}]
