"""A chat request's structure, read once for every caller (Python API, server, browser, CLI): which grammar
constrains the reply, how the prompt renders its tools, and how the reply's text splits into content, reasoning
and tool calls.

Structured output comes in several dialects and all of them end up as one grammar:

    response_format {"type": "json_object"}                         any JSON object
    response_format {"type": "json_object", "schema": "<json>"}     WebLLM's spelling of a schema
    response_format {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}     OpenAI's
                                                    ("strict": false: best effort, see structured_constraint)
    response_format {"type": "grammar", "grammar": "<GBNF>"}         llama.cpp's GBNF dialect
    response_format {"type": "regex", "regex": "<pattern>"}
    grammar="<GBNF>" / json_schema={...}                             llama-server's top-level fields

Only one may be given: two constraints on one reply would have to be intersected, and a request that asks for
both is more likely a mistake than a wish.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .template import ChatTemplate, template_variables
from ..errors import FieldError, GrammarError
from ..grammar import Constraint, Grammar, VocabIndex
from ..grammar.json_schema import SchemaRules, json_object_gbnf, schema_to_gbnf
from ..grammar.regex import regex_to_gbnf
from ..tokenizer.tokenizer import Tokenizer
from .tools import ReplyParser, reasoning_parser, tool_format_for


def structured_constraint(tokenizer: Tokenizer, response_format: Any = None, *, grammar: Any = None,
                          json_schema: Any = None) -> Constraint | None:
    """The constraint a request's structured-output fields ask for; None for free text. Raises FieldError naming
    the field for malformed ones, GrammarError/UnsupportedSchemaError for grammars and schemas that cannot be
    enforced. A json_schema with "strict": false is best effort: keywords no grammar enforces are left out and
    named in the constraint's `unenforced`, which the answer reports."""
    given = [name for name, value in (("response_format", response_format), ("grammar", grammar),
                                       ("json_schema", json_schema)) if value is not None]
    if response_format is not None and _format_type(response_format) == "text":
        given.remove("response_format")
    if len(given) > 1:
        raise FieldError(f"{' and '.join(given)} both constrain the reply; give only one", given[1])
    if not given:
        return None
    try:
        unenforced: tuple[str, ...] = ()
        if grammar is not None:
            gbnf = _string(grammar, "grammar")
        elif json_schema is not None:
            gbnf = schema_to_gbnf(_schema(json_schema, "json_schema"))
        else:
            gbnf, unenforced = _from_response_format(response_format)
        return Constraint(parse_grammar(gbnf, tokenizer), unenforced=unenforced)
    except GrammarError as exc:  # the server's 400 names the field it came from
        if getattr(exc, "param", None) is None:
            exc.param = given[0]
        raise
    except UnicodeEncodeError:  # JSON may carry a lone surrogate (\ud800), which no reply's UTF-8 can hold
        raise FieldError(f"`{given[0]}` holds text that is not valid Unicode (a lone surrogate code point)",
                         given[0]) from None


def parse_grammar(gbnf: str, tokenizer: Tokenizer) -> Grammar:
    """GBNF bound to this vocabulary: `<...>` in it names the model's special tokens."""
    return Grammar.parse(gbnf, special=_special_tokens(tokenizer))


def _special_tokens(tokenizer: Tokenizer) -> dict[str, int]:
    return VocabIndex.for_tokenizer(tokenizer).special_texts


def _format_type(response_format: Any) -> str:
    if not isinstance(response_format, Mapping) or not isinstance(response_format.get("type"), str):
        raise FieldError('response_format must be an object with a "type": "text", "json_object", "json_schema", '
                         '"grammar" or "regex"', "response_format")
    return response_format["type"]


def _from_response_format(response_format: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The GBNF, and the keywords a best-effort schema left out."""
    kind = _format_type(response_format)
    if kind == "json_object":
        _only(response_format, {"type", "schema"})
        schema = response_format.get("schema")
        if schema is None:
            return json_object_gbnf(), ()
        return schema_to_gbnf(_schema(schema, "response_format.schema")), ()
    if kind == "json_schema":
        _only(response_format, {"type", "json_schema"})
        spec = response_format.get("json_schema")
        if not isinstance(spec, Mapping):
            raise FieldError('response_format.json_schema must be an object: {"name": ..., "schema": {...}}',
                             "response_format.json_schema")
        unknown = sorted(set(spec) - {"name", "schema", "strict", "description"})
        if unknown:
            raise FieldError(f"response_format.json_schema has unknown field(s) {', '.join(unknown)}",
                             "response_format.json_schema")
        if "schema" not in spec:
            raise FieldError('response_format.json_schema needs a "schema"; for any JSON object use '
                             '{"type": "json_object"}', "response_format")
        if spec.get("strict", True) not in (True, False):
            raise FieldError("response_format.json_schema.strict must be true or false",
                             "response_format.json_schema.strict")
        rules = SchemaRules()
        rules.add(_schema(spec["schema"], "response_format.json_schema.schema"), "root",
                  strict=spec.get("strict") is not False)  # OpenAI's default is strict, as is ours
        return rules.gbnf(), tuple(rules.unenforced)
    if kind == "grammar":
        _only(response_format, {"type", "grammar"})
        return _string(response_format.get("grammar"), "response_format.grammar"), ()
    if kind == "regex":
        _only(response_format, {"type", "regex", "pattern"})
        pattern = response_format.get("regex", response_format.get("pattern"))
        return regex_to_gbnf(_string(pattern, "response_format.regex")), ()
    raise FieldError(f"response_format type {kind!r} is not one of text, json_object, json_schema, grammar, regex",
                     "response_format.type")


def _only(obj: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise FieldError(f"response_format of type {obj['type']!r} takes no field(s) {', '.join(unknown)}",
                         "response_format")


def _string(value: Any, param: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise FieldError(f"{param} must be a non-empty string", param)
    return value


def _schema(value: Any, param: str) -> Any:
    """A schema object; WebLLM (and some clients) send it as JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise FieldError(f"{param} is not valid JSON: {exc}", param) from None
    if not isinstance(value, (Mapping, bool)):
        raise FieldError(f"{param} must be a JSON schema (an object)", param)
    return value


@dataclass
class ChatSetup:
    """What a chat request becomes: the prompt text, the constraint on the reply, and how to read the reply."""

    prompt: str
    constraint: Constraint | None

    _template: ChatTemplate | None = None
    _tool_prompt: Any = None

    def parser(self) -> ReplyParser:
        """A fresh parser for one reply (one per choice)."""
        if self._tool_prompt is not None:
            return self._tool_prompt.parser()
        return reasoning_parser(self._template, self.prompt)


def prepare_chat(template: ChatTemplate, tokenizer: Tokenizer, messages: Sequence[Mapping[str, Any]], *,
                 response_format: Any = None,
                 grammar: Any = None, json_schema: Any = None, tools: Any = None, tool_choice: Any = None,
                 parallel_tool_calls: Any = None, template_kwargs: Any = None) -> ChatSetup:
    """Render the prompt and build the reply's constraint for a chat request, refusing malformed fields."""
    kwargs = template_variables(template_kwargs)
    structured = structured_constraint(tokenizer, response_format, grammar=grammar, json_schema=json_schema)
    if parallel_tool_calls is not None and not isinstance(parallel_tool_calls, bool):
        raise FieldError("parallel_tool_calls must be true or false", "parallel_tool_calls")
    offered = tools not in (None, [])
    if not offered:
        if tool_choice not in (None, "none", "auto"):
            raise FieldError("tool_choice needs tools to choose from", "tool_choice")
        constraint = structured
        if not _mentions_tools(messages):
            return ChatSetup(template.render(messages, add_generation_prompt=True, **kwargs), constraint, template)
        # Earlier calls and their results still render the way the model's tool format writes them.
        prompt = tool_format_for(template).prepare(template, messages, template_kwargs=kwargs).text
        return ChatSetup(prompt, constraint, template)
    if structured is not None and tool_choice != "none":
        raise FieldError("response_format and tools cannot both constrain one reply; set tool_choice to "
                         '"none" to get structured output while tools are listed', "response_format")
    fmt = tool_format_for(template)
    tool_prompt = fmt.prepare(template, messages, tools=tools, tool_choice="auto" if tool_choice is None else tool_choice,
                              parallel_tool_calls=True if parallel_tool_calls is None else parallel_tool_calls,
                              template_kwargs=kwargs, special_tokens=_special_tokens(tokenizer))
    if structured is not None:
        constraint = structured
    elif tool_prompt.grammar is None:
        constraint = None
    else:
        lazy = tool_prompt.lazy
        constraint = Constraint(parse_grammar(tool_prompt.grammar, tokenizer),
                                tool_prompt.triggers if lazy else (), tool_prompt.start_triggers if lazy else ())
    return ChatSetup(tool_prompt.text, constraint, template, tool_prompt)


def _mentions_tools(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any(isinstance(m, Mapping) and (m.get("tool_calls") or m.get("role") == "tool") for m in messages)
