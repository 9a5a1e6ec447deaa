"""Grammars and JSON schemas from clients: deep or long inputs end in a GrammarError naming where, found while
compiling, and the compilers' work grows with the input's size, never with Python's stack."""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager

import pytest

from llmchat.errors import GrammarError
from llmchat.grammar import Grammar
from llmchat.grammar.gbnf import MAX_GROUP_DEPTH
from llmchat.grammar.grammar import MAX_NESTING
from llmchat.grammar.json_schema import schema_to_gbnf
from llmchat.grammar.schema_document import MAX_DEPTH


@contextmanager
def shallow_stack(frames: int = 150):
    """Python's recursion limit a little above the current depth: what compiles here does not recurse per rule,
    per property or per $ref."""
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def accepts(grammar: Grammar, text: str) -> bool:
    matcher = grammar.matcher()
    return matcher.advance(text.encode("utf-8")) and matcher.can_end


def test_nested_groups_are_refused_past_the_limit() -> None:
    Grammar.parse("root ::= " + "(" * MAX_GROUP_DEPTH + '"a"' + ")" * MAX_GROUP_DEPTH)
    with pytest.raises(GrammarError, match=f"groups nest more than {MAX_GROUP_DEPTH} deep"):
        Grammar.parse("root ::= " + "(" * 5000 + '"a"' + ")" * 5000)


def test_a_long_chain_of_rules_compiles_without_recursion() -> None:
    chain = "\n".join(f"r{i} ::= r{i + 1}" for i in range(20000)) + '\nr20000 ::= "x"\nroot ::= r0'
    with shallow_stack():
        grammar = Grammar.parse(chain)
        assert accepts(grammar, "x") and not accepts(grammar, "y")


def test_rules_nested_before_any_input_are_refused_past_the_limit() -> None:
    def nested(n: int) -> str:
        return "\n".join(f'r{i} ::= r{i + 1} "x"' for i in range(n)) + f'\nr{n} ::= "y"\nroot ::= r0'

    with shallow_stack():
        assert accepts(Grammar.parse(nested(MAX_NESTING - 8)), "y" + "x" * (MAX_NESTING - 8))
        with pytest.raises(GrammarError, match=f"rules nest more than {MAX_NESTING} deep"):
            Grammar.parse(nested(5000))


def nested_schema(key: str, depth: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {key: schema}, "required": [key]} if key == "properties" else \
            {"type": "array", "items": schema} if key == "items" else {"anyOf": [schema, {"type": "null"}]}
    return schema


@pytest.mark.parametrize("key", ["properties", "items", "anyOf"])
def test_deep_schemas_are_refused_at_their_path(key: str) -> None:
    schema_to_gbnf(nested_schema(key, MAX_DEPTH - 2))
    with pytest.raises(GrammarError, match=f"nest more than {MAX_DEPTH} deep") as caught:
        schema_to_gbnf(nested_schema(key, 800))
    assert "JSON schema at /" in str(caught.value)


@pytest.mark.parametrize("shape", ["$ref", "allOf"])
def test_long_ref_and_allof_chains_are_refused(shape: str) -> None:
    if shape == "$ref":
        defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(3000)} | {"d3000": {"type": "integer"}}
        schema = {"$defs": defs, "$ref": "#/$defs/d0"}
    else:
        schema = {"type": "integer"}
        for _ in range(800):
            schema = {"allOf": [schema, {"minimum": 0}]}
    with pytest.raises(GrammarError, match=f"nest more than {MAX_DEPTH} deep"):
        schema_to_gbnf(schema)


def test_many_optional_properties_make_a_grammar_linear_in_their_count() -> None:
    def schema(n: int) -> dict:
        return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)},
                "additionalProperties": False}

    sizes = {n: len(schema_to_gbnf(schema(n))) for n in (1000, 2000)}
    assert sizes[2000] < 2.2 * sizes[1000], sizes
    with shallow_stack():
        grammar = Grammar.parse(schema_to_gbnf(schema(500)))
    assert accepts(grammar, json.dumps({"p3": 1, "p499": 2}))
    assert accepts(grammar, "{}")
    assert not accepts(grammar, json.dumps({"p499": 2, "p3": 1}))  # declared order, as generation writes it
    assert not accepts(grammar, json.dumps({"p3": 1, "p3 ": 1}))


def test_property_names_of_any_spelling_and_length_close_an_object() -> None:
    long = "x" * 500
    schema = {"type": "object", "properties": {long: {"type": "integer"}, "a^b": {"type": "integer"}},
              "additionalProperties": {"type": "string"}}
    with shallow_stack():
        grammar = Grammar.parse(schema_to_gbnf(schema))
    assert accepts(grammar, json.dumps({long: 1})) and not accepts(grammar, json.dumps({long: "s"}))
    assert accepts(grammar, json.dumps({"x" * 499: "s"})) and accepts(grammar, json.dumps({"x" * 501: "s"}))
    assert accepts(grammar, json.dumps({"a^b": 2, "z": "q"})) and not accepts(grammar, json.dumps({"a^b": "q"}))


def test_rule_names_that_normalise_alike_are_found_without_probing_each() -> None:
    from llmchat.grammar.json_text import Rules

    class Counted(dict):
        probes = 0

        def __contains__(self, key) -> bool:
            Counted.probes += 1
            return super().__contains__(key)

    rules = Rules()
    rules.rules = Counted()
    names = [rules.add(f"key{'!' * (i % 7)}{'?' * (i % 5)}", f'"{i}"') for i in range(5000)]
    assert len(set(names)) == 5000
    assert Counted.probes < 3 * 5000  # each name probed a few times, not once per name made before it
    assert rules.add("key!", '"3"') == names[3]  # the same body under a like name is the same rule


def test_an_anyof_wider_than_the_parses_a_grammar_holds_is_refused_before_it_is_built() -> None:
    from llmchat.grammar.grammar import MAX_STACKS

    options = [{"type": "object", "properties": {f"k{i}": {"const": i}}, "required": [f"k{i}"]}
               for i in range(MAX_STACKS + 1)]
    with pytest.raises(GrammarError, match=f"JSON schema at /anyOf: {MAX_STACKS + 1} alternatives"):
        schema_to_gbnf({"anyOf": options})
