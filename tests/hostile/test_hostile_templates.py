"""Chat templates are code from downloaded files: each render's work is bounded (see chat/render_budget.py).

The hostile templates run in a child process under a 3 GiB address-space limit, so that a budget that stopped
working fails these tests instead of taking the machine's memory; the work each one did is measured as the bytes
Python allocated (tracemalloc's peak) and the operations charged, not as wall-clock time."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmchat.chat import render_budget
from llmchat.chat.render_budget import TemplateBudgetError
from llmchat.chat.template import ChatTemplate
from llmchat.errors import ChatTemplateError

TEMPLATES = Path(__file__).parents[1] / "data" / "templates"

# Each template would run for hours or take gigabytes without the budget. The first three are stopped by the
# operations they do; the memory of the others is measured.
HOSTILE = {
    "nested loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "exponential macro": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
    "recursive loop": "{% for m in [[1, 1], [1, 1]] recursive %}{{ loop([m, m]) }}{% endfor %}",
    "lipsum": "{{ lipsum(1000000) }}",
    "repetition": "{{ 'a' * 10**9 }}",
    "list repetition": "{{ ([0] * 10**9)|length }}",
    "power": "{{ 10 ** (10 ** 8) }}",
    "squaring": "{% set ns = namespace(x=10**100) %}{% for i in range(64) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
    "join of repeats": "{{ (['x' * 1000000] * 1000)|join }}",
    "join of a generator": "{{ (['x' * 1000000] * 1000)|map('string')|join }}",
    "str.join": "{{ ''.join(['x' * 1000000] * 1000) }}",
    "replace empty": "{{ ('a' * 100000)|replace('', 'b' * 1000) }}",
    "str.replace": "{{ ('a' * 100000).replace('a', 'b' * 1000) }}",
    "center": "{{ 'a'|center(1000000000) }}",
    "ljust": "{{ 'a'.ljust(1000000000) }}",
    "expandtabs": "{{ ('\t' * 100000).expandtabs(100000) }}",
    "indent": "{{ ('a\n' * 100000)|indent(100000) }}",
    "percent width": "{{ '%1000000000d' % 1 }}",
    "percent star width": "{{ '%*d' % (1000000000, 1) }}",
    "format filter": "{{ '%1000000000d'|format(1) }}",
    "str.format width": "{{ '{:>1000000000}'.format(1) }}",
    "str.format nested width": "{{ '{:>{w}}'.format(1, w=1000000000) }}",
    "tojson indent": "{{ ([[[[1, 2, 3]]] * 1000] * 100)|tojson(indent=100000) }}",
    "doubling concat": "{% set ns = namespace(x='a') %}{% for i in range(64) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}",
    "doubling plus": "{% set ns = namespace(x='a') %}{% for i in range(64) %}{% set ns.x = ns.x + ns.x %}{% endfor %}",
    "literal in a loop": "{% for i in range(100000) %}{% for j in range(100) %}{% set x %}" + "L" * 4000
                         + "{% endset %}{% endfor %}{% endfor %}",
    "output": "{% for i in range(100000) %}{% for j in range(1000) %}{{ 'x' * 1000 }}{% endfor %}{% endfor %}",
}

_CHILD = """
import json, resource, sys, tracemalloc
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from llmchat.chat.template import ChatTemplate
from llmchat.errors import ChatTemplateError
results = {}
for index, (name, source) in enumerate(json.loads(sys.stdin.read()).items()):
    if index >= 3:  # tracing makes each Python call some 25 times slower: only where memory is the question
        tracemalloc.start()
    template = ChatTemplate(source)
    try:
        template.render([{"role": "user", "content": "hi"}])
        outcome = "rendered"
    except ChatTemplateError as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    except BaseException as exc:
        outcome = f"{type(exc).__name__}: {exc}"[:300]
    results[name] = {"outcome": outcome, "peak": tracemalloc.get_traced_memory()[1]}
    tracemalloc.stop()  # and get_traced_memory() is (0, 0) when it was not started
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def hostile_results() -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(HOSTILE), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_template_stops_at_its_budget(hostile_results: dict, name: str) -> None:
    result = hostile_results[name]
    assert result["outcome"].startswith("TemplateBudgetError: chat template custom went past what one render may do"), \
        result["outcome"]
    assert any(limit in result["outcome"] for limit in ("operations", "characters", "bits", "deep")), result["outcome"]
    # Text is charged as it is produced (or before): a refused render held at most a few times the character
    # limit (1-4 bytes a character, and Python's list and dict overheads).
    assert result["peak"] < 8 * render_budget.CHARACTERS, result


def test_compiling_does_not_fold_constants() -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        template = ChatTemplate("{% if false %}{{ 'a' * 10**9 }}{{ 'b'|center(10**9) }}{% endif %}ok")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
    assert template.render([{"role": "user", "content": "hi"}]) == "ok"


def test_the_error_names_the_template_and_the_limit() -> None:
    metadata = {"tokenizer.chat_template": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                                           "{% endfor %}"}
    with pytest.raises(TemplateBudgetError, match=r"tokenizer\.chat_template .*1,000,000 operations"):
        ChatTemplate.from_metadata(metadata).render([{"role": "user", "content": "hi"}])


def test_a_budget_is_per_render() -> None:
    # Each render starts afresh: a template that spends most of the budget renders any number of times.
    template = ChatTemplate("{% for i in range(40000) %}{% for j in range(10) %}{% endfor %}{% endfor %}done")
    for _ in range(3):
        assert template.render([{"role": "user", "content": "hi"}]) == "done"


def test_budgeted_filters_and_methods_give_the_same_text() -> None:
    source = ("{{ ['a', 'b']|join('-') }}|{{ 'x y'|replace(' ', '_') }}|{{ 'a\nb'|indent(2, first=true) }}|"
              "{{ '%05d'|format(42) }}|{{ '{:>4}|{}'.format(7, 'z') }}|{{ '%s=%d' % ('n', 3) }}|"
              "{{ 'q'.ljust(3) ~ 'r' }}|{{ {'k': [1, 2]}|tojson(indent=2) }}|{{ 'p' * 3 }}|{{ 2 ** 10 }}|"
              "{{ '-'.join(['u', 'v']) }}|{% for c in 'ab' %}{{ loop.index }}{{ c }}{% endfor %}")
    expected = ("a-b|x_y|  a\n  b|00042|   7|z|n=3|q  r|{\n  \"k\": [\n    1,\n    2\n  ]\n}|ppp|1024|u-v|1a2b")
    assert ChatTemplate(source).render([{"role": "user", "content": "hi"}]) == expected


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.jinja")), ids=lambda p: p.stem)
def test_real_templates_render_long_conversations_within_the_budget(path: Path) -> None:
    tools = [{"type": "function", "function": {"name": f"f{i}", "description": "does things " * 20, "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}} for i in range(20)]
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 40} for i in range(2001)]
    template = ChatTemplate(path.read_text(), bos_token="<s>", eos_token="</s>")
    budget = render_budget.RenderBudget()
    try:
        text = template.render(messages, tools=tools, budget=budget)
    except ChatTemplateError as exc:  # some templates refuse tools or alternation; none may hit the budget
        assert not isinstance(exc, TemplateBudgetError)
        pytest.skip(f"the template refuses this conversation: {exc}")
    assert len(text) > 2001 * 40 * 6
    # A tenth of the budget at most: real conversations are far from the limits.
    assert budget.operations_left > 0.9 * render_budget.OPERATIONS
    assert budget.characters_left > 0.5 * render_budget.CHARACTERS
