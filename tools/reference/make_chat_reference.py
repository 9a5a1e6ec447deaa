"""Record llama.cpp's built-in chat formatting (`llama_chat_apply_template` with a template name) for the formats
llmchat has as built-ins, in tests/data/chat-builtin-templates.json. Run with llama-cpp-python 0.3.36:

    ~/.cache/llmchat-peers/llamacpp-venv/bin/python tools/reference/make_chat_reference.py

Each case: template name, messages, whether the generation prompt is added, and llama.cpp's text. No model is
needed: the formatter works on names and strings alone.
"""
from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import llama_cpp

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/chat-builtin-templates.json"
TEMPLATES = ["chatml", "gemma", "llama3", "phi3", "phi4", "zephyr", "command-r", "deepseek3", "granite",
             "mistral-v7", "mistral-v7-tekken"]

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a planet."}],
    [{"role": "system", "content": "You are a helpful assistant"}, {"role": "user", "content": "Hello"},
     {"role": "assistant", "content": "Hi there"}, {"role": "user", "content": "How are you?"}],
    # Whitespace that some formats trim (ASCII only, as C's isspace: U+3000 and U+00A0 stay).
    [{"role": "system", "content": "  padded system \n"}, {"role": "user", "content": "\n\t hello \x0b\x0c\r\n"},
     {"role": "assistant", "content": " answer  "}, {"role": "user", "content": "\u3000wide\u3000 \xa0"}],
    # Two system messages: Gemma joins them into the first user turn.
    [{"role": "system", "content": "First rule."}, {"role": "system", "content": " Second rule."},
     {"role": "user", "content": "Go."}],
    [{"role": "user", "content": "日本語で答えて 😀"}, {"role": "assistant", "content": "はい、どうぞ。"},
     {"role": "user", "content": "<start_of_turn> and <|im_start|> as text"}],
    [{"role": "user", "content": "What's the weather?"}, {"role": "assistant", "content": "Let me check."},
     {"role": "tool", "content": "sunny, 21 C"}, {"role": "user", "content": "Thanks"}],
    [{"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Tell me a joke."}],
    [{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "Good morning"}],
    [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}, {"role": "user", "content": "empty"}],
]


def apply(template: str, messages: list[dict], add_generation_prompt: bool) -> str:
    chat = (llama_cpp.llama_chat_message * len(messages))(
        *(llama_cpp.llama_chat_message(m["role"].encode(), m["content"].encode()) for m in messages))
    size = 4096
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_chat_apply_template(template.encode(), chat, len(messages), add_generation_prompt,
                                                buf, size)
        if n < 0:
            raise RuntimeError(f"llama.cpp does not know the template {template!r}")
        if n <= size:
            return buf.raw[:n].decode("utf-8")
        size = n


def main() -> int:
    cases = [{"template": name, "messages": messages, "add_generation_prompt": add, "text": apply(name, messages, add)}
             for name in TEMPLATES for messages in CONVERSATIONS for add in (True, False)]
    record = {"reference": f"llama.cpp's llama_chat_apply_template via llama-cpp-python {llama_cpp.__version__}",
              "made_by": "tools/reference/make_chat_reference.py", "cases": cases}
    OUT.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(cases)} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
