"""Built-in chat templates against llama.cpp's own formatter, the choice of template for files without one, and
Qwen3's real template (tests/data/templates, from llama.cpp's models/templates) with thinking on and off."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmchat.chat.template import ChatTemplate
from llmchat.chat.builtin import BUILTIN_TEMPLATES
from llmchat.errors import ChatTemplateError
from llmchat.gguf.file import open_gguf
from llmchat.tokenizer.tokenizer import Tokenizer

DATA = Path(__file__).parents[1] / "data"
LLAMA_CPP = json.loads((DATA / "chat-builtin-templates.json").read_text(encoding="utf-8"))
GEMMA = json.loads((DATA / "gemma-3-270m-q4_k_m.json").read_text(encoding="utf-8"))
QWEN3 = (DATA / "templates/Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")


def test_every_builtin_is_checked_against_llama_cpp() -> None:
    assert {case["template"] for case in LLAMA_CPP["cases"]} == set(BUILTIN_TEMPLATES)


@pytest.mark.parametrize("name", sorted(BUILTIN_TEMPLATES))
def test_builtin_formats_like_llama_cpp(name: str) -> None:
    template = ChatTemplate.builtin_template(name)
    cases = [case for case in LLAMA_CPP["cases"] if case["template"] == name]
    assert len(cases) == 20
    for case in cases:
        got = template.render(case["messages"], add_generation_prompt=case["add_generation_prompt"])
        assert got == case["text"], (case["messages"], case["add_generation_prompt"])


def test_builtin_writes_bos_text_it_is_given() -> None:
    template = ChatTemplate.builtin_template("gemma", bos_token="<bos>")
    assert template.render([{"role": "user", "content": "Hi"}]) == (
        "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n")
    with pytest.raises(ChatTemplateError, match="no built-in chat template 'gemma2'"):
        ChatTemplate.builtin_template("gemma2")


def vocabulary(*tokens: str, **extra: object) -> dict[str, object]:
    return {"general.architecture": "llama", "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt2",
            "tokenizer.ggml.tokens": ["a", *tokens], **extra}


@pytest.mark.parametrize(("tokens", "name"), [
    (("<start_of_turn>", "<end_of_turn>"), "gemma"),
    (("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"), "llama3"),
    (("<|im_start|>", "<|im_end|>"), "chatml"),
    (("<|im_start|>", "<|im_sep|>", "<|im_end|>"), "phi4"),
    (("<|user|>", "<|assistant|>", "<|end|>"), "phi3"),
    (("<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>"), "command-r"),
    (("<｜User｜>", "<｜Assistant｜>"), "deepseek3"),
    (("<|start_of_role|>", "<|end_of_role|>"), "granite"),
    (("[SYSTEM_PROMPT]", "[INST]", "[/INST]"), "mistral-v7"),
    (("<start_of_turn>",), "chatml"),  # one marker without its partner decides nothing
    ((), "chatml"),
])
def test_files_without_template_get_the_format_their_vocabulary_has(tokens: tuple[str, ...], name: str) -> None:
    template = ChatTemplate.from_metadata(vocabulary(*tokens))
    assert (template.name, template.from_file, template.is_default) == (name, False, True)
    assert name in template.describe() and "has none" in template.describe()


def test_mistral_small_rule_and_file_templates_win() -> None:
    tekken = vocabulary("[INST]", **{"tokenizer.ggml.pre": "tekken", "llama.block_count": 40})
    assert ChatTemplate.from_metadata(tekken).name == "mistral-v7-tekken"
    own = ChatTemplate.from_metadata(vocabulary("<start_of_turn>", "<end_of_turn>",
                                                **{"tokenizer.chat_template": "{{ messages[0].content }}"}))
    assert (own.name, own.from_file, own.is_default) == ("tokenizer.chat_template", True, False)
    assert own.describe() == "tokenizer.chat_template from the model file"


def test_bos_text_only_where_the_vocabulary_adds_bos() -> None:
    tokens = ["<bos>", "<start_of_turn>", "<end_of_turn>"]
    spm = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.bos_token_id": 0}
    assert ChatTemplate.from_metadata(spm).bos_token == "<bos>"
    assert ChatTemplate.from_metadata({**spm, "tokenizer.ggml.add_bos_token": False}).bos_token == ""
    assert ChatTemplate.from_metadata({**spm, "tokenizer.ggml.model": "gpt2"}).bos_token == ""


def test_gemma3_file_chats_in_gemma_format(gemma3_path: Path) -> None:
    with open_gguf(gemma3_path) as model:
        metadata = model.metadata
    assert "tokenizer.chat_template" not in metadata
    template = ChatTemplate.from_metadata(metadata)
    assert (template.name, template.from_file, template.bos_token) == ("gemma", False, "<bos>")
    # The chat prompt of the reference data, which llama.cpp tokenized with BOS added: the same ids here.
    question = "What is the boiling point of water at sea level?"
    prompt = template.render([{"role": "user", "content": question}])
    reference = next(p for p in GEMMA["prompts"] if p["text"].startswith("<start_of_turn>user\n" + question))
    assert prompt == "<bos>" + reference["text"]
    assert Tokenizer.from_metadata(metadata).encode(prompt, parse_special=True) == reference["ids"]


# --- Qwen3's own template ------------------------------------------------------------------------------------------

QWEN3_SYSTEM = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi"}]
HEAD = "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize(("extra", "tail"), [
    ({"enable_thinking": False}, "<think>\n\n</think>\n\n"),  # thinking off: an empty thought is written for it
    ({"enable_thinking": True}, ""),
    ({}, ""),
])
def test_qwen3_thinking_switch(extra: dict, tail: str) -> None:
    assert ChatTemplate(QWEN3).render(QWEN3_SYSTEM, **extra) == HEAD + tail


def test_qwen3_drops_earlier_thoughts_and_keeps_the_last() -> None:
    template = ChatTemplate(QWEN3)
    messages = [{"role": "user", "content": "Q1"},
                {"role": "assistant", "content": "<think>\nfirst thought\n</think>\n\nAnswer one."},
                {"role": "user", "content": "And two?"}]
    assert template.render(messages, enable_thinking=True) == (
        "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nAnswer one.<|im_end|>\n"
        "<|im_start|>user\nAnd two?<|im_end|>\n<|im_start|>assistant\n")
    last = [*messages[:2], {"role": "user", "content": "Q2"},
            {"role": "assistant", "content": "Two.", "reasoning_content": "\nsecond thought\n"}]
    assert template.render(last, add_generation_prompt=False).endswith(
        "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\nsecond thought\n</think>\n\nTwo.<|im_end|>\n")


def test_qwen3_tools_and_tool_calls() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    messages = [{"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                                  "arguments": {"city": "Paris"}}}]},
                {"role": "tool", "content": "sunny"}]
    rendered = ChatTemplate(QWEN3).render(messages, tools=tools, enable_thinking=False)
    assert rendered == (
        "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + json.dumps(tools[0], ensure_ascii=False) + "\n</tools>\n\nFor each function call, return a json object "
        "with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n")
