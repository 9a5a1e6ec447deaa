"""Chat templates: real and typical templates render what the models expect; bad input fails clearly."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from llmchat.chat.template import DEFAULT_CHAT_TEMPLATE, ChatTemplate, render_chat, validate_messages
from llmchat.errors import ChatTemplateError
from llmchat.gguf.file import open_gguf

DATA = Path(__file__).parents[1] / "data"

# A Llama-3-style template: header-framed turns, trimmed content, BOS text at the very start.
LLAMA3_STYLE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n{{ message['content'] | trim }}<|eot_id|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

# A Mistral-style template: [INST] blocks, an optional system prompt folded into the first user turn, strict
# user/assistant alternation enforced with raise_exception; laid out over indented lines with `-` markers, as such
# templates are.
MISTRAL_STYLE = """\
{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- set system = messages[0]['content'] + '\\n\\n' %}
    {%- set turns = messages[1:] %}
{%- else %}
    {%- set system = '' %}
    {%- set turns = messages %}
{%- endif %}
{%- for message in turns %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {{- '[INST] ' + (system if loop.first else '') + message['content'] + ' [/INST]' }}
    {%- else %}
        {{- ' ' + message['content'] + eos_token }}
    {%- endif %}
{%- endfor %}
"""

# A tool-calling template in the style of recent models: tools as JSON in the system turn, tool calls and tool
# results as JSON inside turns.
TOOLS_STYLE = """\
{% if tools is defined %}
<|system|>You may call these functions:
{% for tool in tools %}
{{ tool | tojson }}
{% endfor %}
<|end|>
{% endif %}
{% for message in messages %}
    {% if message.tool_calls is defined and message.tool_calls %}
<|assistant|>{{ message.tool_calls | map(attribute='function') | list | tojson }}<|end|>
    {% else %}
<|{{ message.role }}|>{{ message.content }}<|end|>
    {% endif %}
{% endfor %}
{% if add_generation_prompt %}
<|assistant|>
{% endif %}
"""

USER_ONLY = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def smollm2_metadata(smollm2_path: Path) -> dict[str, Any]:
    with open_gguf(smollm2_path) as gguf:
        return gguf.metadata


def _chatml_messages(prompt: str) -> tuple[list[dict[str, str]], bool]:
    """Read messages back out of a ChatML prompt: the expected rendering is the golden prompt text itself."""
    turns = re.findall(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>\n", prompt, flags=re.S)
    messages = [{"role": role, "content": content} for role, content in turns]
    rest = re.sub(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>\n", "", prompt, flags=re.S)
    assert rest in ("", "<|im_start|>assistant\n"), f"unexpected ChatML tail {rest!r}"
    return messages, rest != ""


def _golden_chat_prompts() -> list[str]:
    prompts = json.loads((DATA / "texts.json").read_text(encoding="utf-8"))["prompts"]
    chat = [p for p in prompts if "<|im_start|>" in p]
    assert chat, "texts.json lost its chat-form prompts"
    return chat


# --- the real model's template ----------------------------------------------------------------------------------


@pytest.mark.model
@pytest.mark.parametrize("prompt", _golden_chat_prompts())
def test_smollm2_template_reproduces_the_golden_chat_prompts(smollm2_metadata: dict[str, Any], prompt: str) -> None:
    messages, add_generation_prompt = _chatml_messages(prompt)
    template = ChatTemplate.from_metadata(smollm2_metadata)
    assert not template.is_default
    assert template.render(messages, add_generation_prompt=add_generation_prompt) == prompt


@pytest.mark.model
def test_smollm2_rendered_prompt_tokenizes_to_the_golden_ids(smollm2_metadata: dict[str, Any]) -> None:
    from llmchat.tokenizer.tokenizer import Tokenizer

    golden = json.loads((DATA / "smollm2-135m-instruct-q4_1.json").read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_metadata(smollm2_metadata)
    checked = 0
    for case in golden["prompts"]:
        if "<|im_start|>" not in case["text"]:
            continue
        messages, add_generation_prompt = _chatml_messages(case["text"])
        prompt = render_chat(smollm2_metadata, messages, add_generation_prompt=add_generation_prompt)
        assert tokenizer.encode(prompt, add_bos=golden["add_bos"], parse_special=True) == case["ids"]
        checked += 1
    assert checked > 0


@pytest.mark.model
def test_smollm2_template_adds_its_default_system_prompt(smollm2_metadata: dict[str, Any]) -> None:
    rendered = render_chat(smollm2_metadata, USER_ONLY)
    assert rendered.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert rendered.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.model
def test_special_tokens_come_from_the_vocabulary(smollm2_metadata: dict[str, Any]) -> None:
    template = ChatTemplate.from_metadata(smollm2_metadata)
    assert (template.bos_token, template.eos_token) == ("<|im_start|>", "<|im_end|>")


# --- other template families ------------------------------------------------------------------------------------


def test_llama3_style_template() -> None:
    template = ChatTemplate(LLAMA3_STYLE, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  Hi there \n"}]
    assert template.render(messages) == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert template.render(messages, add_generation_prompt=False).endswith("Hi there<|eot_id|>")


def test_mistral_style_template() -> None:
    template = ChatTemplate(MISTRAL_STYLE, bos_token="<s>", eos_token="</s>")
    messages = [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Bonjour"},
        {"role": "user", "content": "Thanks"},
    ]
    assert template.render(messages) == (
        "<s>[INST] Answer in French.\n\nHello [/INST] Bonjour</s>[INST] Thanks [/INST]"
    )


def test_block_tags_own_their_lines_as_in_transformers() -> None:
    # trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before it; expression lines
    # keep theirs. Without both, this would render "\n    \nU: Hi\n    \n".
    template = """\
{% for message in messages %}
    {% if message.role == 'user' %}
U: {{ message.content }}
    {% endif %}
{% endfor %}
"""
    assert render_chat(template, USER_ONLY) == "U: Hi\n"


def test_raise_exception_becomes_a_chat_template_error() -> None:
    template = ChatTemplate(MISTRAL_STYLE, bos_token="<s>", eos_token="</s>")
    with pytest.raises(ChatTemplateError, match="Conversation roles must alternate"):
        template.render([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])


def test_tools_and_tool_calls_pass_through_as_plain_json() -> None:
    tools = [{
        "type": "function",
        "function": {
            "name": "météo",
            "description": "Weather <today> & tomorrow",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }]
    messages = [
        {"role": "user", "content": "Weather in Zürich?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"type": "function", "function": {"name": "météo", "arguments": {"city": "Zürich"}}}]},
        {"role": "tool", "content": '{"temp": 21}'},
    ]
    rendered = render_chat(TOOLS_STYLE, messages, tools=tools)
    assert json.dumps(tools[0], ensure_ascii=False) in rendered  # non-ASCII kept, no HTML escaping of < > &
    assert '<|assistant|>[{"name": "météo", "arguments": {"city": "Zürich"}}]<|end|>' in rendered
    assert '<|tool|>{"temp": 21}<|end|>' in rendered
    assert rendered.endswith("<|assistant|>\n")
    assert "You may call" not in render_chat(TOOLS_STYLE, USER_ONLY), "tools must be undefined when not given"


def test_tojson_accepts_the_usual_keywords() -> None:
    rendered = render_chat("{{ {'b': 1, 'a': 'é'} | tojson(indent=2, sort_keys=True) }}", USER_ONLY)
    assert rendered == '{\n  "a": "é",\n  "b": 1\n}'


def test_strftime_now_and_extra_variables() -> None:
    template = "{{ strftime_now('%Y') }}|{{ date_string | default('none') }}|{{ enable_thinking }}"
    rendered = render_chat(template, USER_ONLY, enable_thinking=False)
    assert rendered in {f"{year}|none|False" for year in (datetime.now().year, datetime.now().year + 1)}


def test_loop_controls_and_generation_blocks_are_understood() -> None:
    template = (
        "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
        "{% generation %}[{{ m.content }}]{% endgeneration %}{% endfor %}"
    )
    assert render_chat(template, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]) == "[a]"


def test_model_without_template_gets_chatml() -> None:
    template = ChatTemplate.from_metadata({"general.architecture": "llama"})
    assert template.is_default and template.source == DEFAULT_CHAT_TEMPLATE
    assert template.render(USER_ONLY) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_named_template_variants() -> None:
    metadata = {"tokenizer.chat_template": "main", "tokenizer.chat_template.tool_use": "tools"}
    assert ChatTemplate.from_metadata(metadata, name="tool_use").render(USER_ONLY) == "tools"
    with pytest.raises(ChatTemplateError, match="no chat template named 'rag'"):
        ChatTemplate.from_metadata(metadata, name="rag")


# --- failures -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "{{ messages.__class__.__base__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ raise_exception.__globals__ }}",
        "{{ messages[0].content.format.__self__.__class__ }}",
    ],
)
def test_sandbox_refuses_python_internals(source: str) -> None:
    with pytest.raises(ChatTemplateError, match="unsafe"):
        render_chat(source, USER_ONLY)


def test_sandbox_refuses_to_mutate_the_messages() -> None:
    messages = [{"role": "user", "content": "Hi"}]
    with pytest.raises(ChatTemplateError, match="unsafe"):
        render_chat("{% set _ = messages.append({'role': 'user'}) %}", messages)
    with pytest.raises(ChatTemplateError, match="unsafe"):
        render_chat("{% set _ = messages[0].update({'content': 'x'}) %}", messages)
    assert messages == [{"role": "user", "content": "Hi"}]


def test_syntax_error_carries_the_jinja_message() -> None:
    with pytest.raises(ChatTemplateError, match=r"line 2.*Unexpected end of template.*'endfor'"):
        ChatTemplate("hello\n{% for m in messages %}{{ m.content }}")


def test_runtime_error_in_template_is_wrapped() -> None:
    with pytest.raises(ChatTemplateError, match="TypeError"):
        render_chat("{{ 'x' + messages[0].content }}", [{"role": "assistant", "content": None, "tool_calls": []}])
    with pytest.raises(ChatTemplateError, match="chat template failed"):
        render_chat("{{ messages[0].nothing.deeper }}", USER_ONLY)


def test_template_must_be_a_string() -> None:
    with pytest.raises(ChatTemplateError, match="must be a string"):
        ChatTemplate.from_metadata({"tokenizer.chat_template": ["a", "b"]})


# --- message validation -------------------------------------------------------------------------------------------


def test_text_parts_are_joined_and_input_is_not_modified() -> None:
    parts = [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}]
    messages = [{"role": "user", "content": parts, "name": "ann"}]
    assert validate_messages(messages) == [{"role": "user", "content": "Hello, world", "name": "ann"}]
    assert messages[0]["content"] is parts


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ("hello", "must be a list"),
        ([], "empty"),
        (["hello"], r"messages\[0\] must be an object"),
        ([{"content": "x"}], r"messages\[0\] needs a string 'role'"),
        ([{"role": "usr", "content": "x"}], "unknown role 'usr'"),
        ([{"role": "user"}], r"messages\[0\] \(user\) has no 'content'"),
        ([{"role": "user", "content": 42}], "must be a string or a list of text parts, not int"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "only 'text' parts"),
        ([{"role": "user", "content": [{"type": "text"}]}], r"content\[0\] needs a string 'text'"),
        ([{"role": "user", "content": "x", "tool_calls": [{}]}], "only assistant messages carry 'tool_calls'"),
        ([{"role": "assistant", "content": None, "tool_calls": "call"}], "tool_calls must be a list of objects"),
    ],
)
def test_invalid_messages_are_refused_clearly(messages: Any, error: str) -> None:
    with pytest.raises(ChatTemplateError, match=error):
        validate_messages(messages)


def test_tools_must_be_a_list_of_objects() -> None:
    with pytest.raises(ChatTemplateError, match="tools must be a list"):
        render_chat(DEFAULT_CHAT_TEMPLATE, USER_ONLY, tools={"name": "f"})  # type: ignore[arg-type]


def test_core_imports_without_jinja2() -> None:
    script = (
        "import sys; sys.modules['jinja2'] = None\n"  # makes `import jinja2` fail as if it were not installed
        "import llmchat, llmchat.chat.template, llmchat.hub.catalogue, llmchat.cli\n"
        "from llmchat.errors import ChatTemplateError\n"
        "try:\n"
        "    llmchat.chat.template.ChatTemplate('{{ 1 }}')\n"
        "except ChatTemplateError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "needs jinja2" in result.stdout
