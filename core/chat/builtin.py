"""Built-in chat templates for model files that carry none, and the choice among them.

The formats are llama.cpp's built-in ones (`llama_chat_apply_template` with a template name), written here as
Jinja so they render through the same machinery as templates from files, and checked against llama.cpp's own
output (tests/data/chat-builtin-templates.json). Two deliberate differences from llama.cpp's C++ formatter:

- each template starts with `{{ bos_token }}`. Templates from files (Hugging Face's convention) write BOS
  themselves and the prompt is tokenized without adding one; llama.cpp instead adds BOS when tokenizing the
  output of a built-in template. `ChatTemplate.from_metadata` passes the BOS text only when the vocabulary adds
  BOS, so the ids come out the same;
- content is trimmed of ASCII whitespace only, as C's isspace() does there (Jinja's plain `trim` would also
  remove U+3000 and friends).

Which one a model without a template gets. llama.cpp's server falls back to ChatML for every such model (and
llama-cpp-python to Llama 2's format), except that a Tekken vocabulary with 40 layers (Mistral Small 2503) gets
mistral-v7-tekken. A Gemma 3 file then gets `<|im_start|>` prompts that its vocabulary does not even have as
tokens. So we choose by the turn markers the vocabulary has as tokens, the same markers llama.cpp's
`llm_chat_detect_template` looks for in template text, keep the Mistral rule, and fall back to ChatML.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# What C's isspace() strips, as a Jinja string literal for `trim(...)`.
_TRIM = r"' \t\n\x0b\x0c\r'"

BUILTIN_TEMPLATES: dict[str, str] = {
    "chatml": (
        "{{ bos_token }}{% for message in messages %}"
        "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    ),
    # Gemma has no system turn: system messages (trimmed, joined without separator) open the next non-model turn.
    "gemma": (
        "{{ bos_token }}{% set ns = namespace(system='') %}{% for message in messages %}"
        "{% if message['role'] == 'system' %}{% set ns.system = ns.system + message['content'] | trim(" + _TRIM + ") %}"
        "{% else %}{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
        "{{ '<start_of_turn>' + role + '\n' }}"
        "{% if ns.system and role != 'model' %}{{ ns.system + '\n\n' }}{% set ns.system = '' %}{% endif %}"
        "{{ message['content'] | trim(" + _TRIM + ") + '<end_of_turn>\n' }}"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
    ),
    "llama3": (
        "{{ bos_token }}{% for message in messages %}"
        "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
        "{{ message['content'] | trim(" + _TRIM + ") + '<|eot_id|>' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
        "{% endif %}"
    ),
    "phi3": (
        "{{ bos_token }}{% for message in messages %}"
        "{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
    ),
    "phi4": (
        "{{ bos_token }}{% for message in messages %}"
        "{{ '<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + '<|im_end|>' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}"
    ),
    "zephyr": (
        "{{ bos_token }}{% for message in messages %}"
        "{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|endoftext|>\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
    ),
    # Other roles are left out, as there.
    "command-r": (
        "{{ bos_token }}{% set tokens = {'system': '<|SYSTEM_TOKEN|>', 'user': '<|USER_TOKEN|>', "
        "'assistant': '<|CHATBOT_TOKEN|>'} %}{% for message in messages %}{% if message['role'] in tokens %}"
        "{{ '<|START_OF_TURN_TOKEN|>' + tokens[message['role']] + message['content'] | trim(" + _TRIM + ") }}"
        "{{ '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %}"
    ),
    "deepseek3": (
        "{{ bos_token }}{% for message in messages %}"
        "{% if message['role'] == 'system' %}{{ message['content'] + '\n\n' }}"
        "{% elif message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}"
        "{% elif message['role'] == 'assistant' %}{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<｜Assistant｜>' }}{% endif %}"
    ),
    "granite": (
        "{{ bos_token }}{% for message in messages %}"
        "{{ '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|start_of_role|>assistant<|end_of_role|>' }}{% endif %}"
    ),
    # No generation prompt: the reply follows [/INST] directly.
    "mistral-v7": (
        "{{ bos_token }}{% for message in messages %}"
        "{% if message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}"
        "{% elif message['role'] == 'user' %}{{ '[INST] ' + message['content'] + '[/INST]' }}"
        "{% else %}{{ ' ' + message['content'] + '</s>' }}{% endif %}{% endfor %}"
    ),
    "mistral-v7-tekken": (
        "{{ bos_token }}{% for message in messages %}"
        "{% if message['role'] == 'system' %}{{ '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}"
        "{% elif message['role'] == 'user' %}{{ '[INST]' + message['content'] + '[/INST]' }}"
        "{% else %}{{ message['content'] + '</s>' }}{% endif %}{% endfor %}"
    ),
}

# Turn markers that identify a format when the vocabulary has all of them as tokens; the first match wins.
_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gemma", ("<start_of_turn>", "<end_of_turn>")),
    ("llama3", ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")),
    ("phi4", ("<|im_start|>", "<|im_sep|>", "<|im_end|>")),
    ("chatml", ("<|im_start|>", "<|im_end|>")),
    ("phi3", ("<|user|>", "<|assistant|>", "<|end|>")),
    ("command-r", ("<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>")),
    ("deepseek3", ("<｜User｜>", "<｜Assistant｜>")),
    ("granite", ("<|start_of_role|>", "<|end_of_role|>")),
    ("mistral-v7", ("[SYSTEM_PROMPT]", "[INST]", "[/INST]")),
)


def choose_builtin(metadata: Mapping[str, Any]) -> tuple[str, str]:
    """The built-in template for a model file without one, and why (a phrase for messages)."""
    tokens = metadata.get("tokenizer.ggml.tokens")
    vocabulary = set(tokens) if isinstance(tokens, list) else set()
    arch = metadata.get("general.architecture")
    if metadata.get("tokenizer.ggml.pre") == "tekken" and metadata.get(f"{arch}.block_count") == 40:
        return "mistral-v7-tekken", "a Tekken vocabulary with 40 layers, as llama.cpp decides for Mistral Small"
    for name, markers in _MARKERS:
        if all(marker in vocabulary for marker in markers):
            return name, f"its vocabulary has {' and '.join(markers)}"
    return "chatml", "no known turn markers in its vocabulary; ChatML, as llama.cpp falls back to"
