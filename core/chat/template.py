"""Chat templates: turn a list of messages into the prompt text a model was trained on.

GGUF files carry the Hugging Face chat template as Jinja source in `tokenizer.chat_template` (and named variants
such as `tokenizer.chat_template.tool_use`). We render it the way `transformers` does, so prompts match what the
model saw in training:

- a sandboxed, immutable Jinja environment (templates come with downloaded files: they must not reach Python
  internals, and must not mutate the caller's messages), `trim_blocks` and `lstrip_blocks` on, the `loopcontrols`
  extension (`break`/`continue`), and `{% generation %}` blocks accepted as plain content;
- a budget of work per render (operations and characters produced, see render_budget.py), and no constant
  folding at compile time, so that a hostile template costs bounded time and memory at load and at each render;
- the variables `messages`, `add_generation_prompt`, `bos_token`, `eos_token`, `tools` (only when given, so
  `tools is defined` tests behave) plus any extra keyword the caller passes (`enable_thinking`, `date_string`...);
- the helpers `raise_exception(message)` and `strftime_now(format)`, and a `tojson` filter that emits plain JSON
  (non-ASCII kept, no HTML escaping) with `indent`, `separators`, `sort_keys`, `ensure_ascii` keywords.

A model without a template gets one of llama.cpp's built-in formats, chosen by the turn markers its vocabulary has
(Gemma's `<start_of_turn>`, Llama 3's headers, ChatML's `<|im_start|>`...; see chat_templates.py), ChatML when
none fits. `ChatTemplate.name` and `.from_file` say which template is in use. Messages are validated first (roles, content types) and OpenAI-style content parts are
flattened to text, so every template sees plain strings; errors name the message at fault. Any failure, from a
syntax error to the template's own `raise_exception`, becomes ChatTemplateError carrying Jinja's message.

Jinja2 is imported lazily: the rest of the core imports without it.

In the browser (Pyodide): templates render with the same Jinja2. Jinja2 is a pure wheel on PyPI; its one
dependency, MarkupSafe, falls back to its pure-Python `_native` module when the `_speedups` C extension is absent,
and a pure `py3-none-any` MarkupSafe wheel builds offline from its sdist (`CC=false pip wheel --no-deps
--no-binary :all: markupsafe` builds without the extension). Both wheels are served from our own origin next to
the llmchat wheel and listed in the Pyodide lock file, so no CDN is needed and prompts are byte-identical to the
native ones. A second renderer (a JS Jinja port, or a hand-written formatter per model family) was rejected: it
would drift from `transformers` on exactly the edge cases templates rely on.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from . import render_budget
from .builtin import BUILTIN_TEMPLATES, choose_builtin
from .render_budget import RenderBudget, TemplateBudgetError
from ..errors import ChatTemplateError, FieldError
from ..tokenizer.tokenizer import adds_bos

# ChatML: each turn is `<|im_start|>{role}\n{content}<|im_end|>\n`, and the generation prompt opens an assistant
# turn. The fallback for model files without a template whose vocabulary suggests no other format.
DEFAULT_CHAT_TEMPLATE = BUILTIN_TEMPLATES["chatml"]

# Roles that chat templates in the wild know about. Anything else is almost always a typo, and templates tend to
# drop unknown roles silently, so we refuse it up front.
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})

_TEMPLATE_KEY = "tokenizer.chat_template"


class ChatTemplate:
    """A compiled chat template plus the special-token strings it may reference.

    `name` says which template it is: the metadata key it came from when `from_file` (`tokenizer.chat_template`
    or a named variant), a built-in's name (`builtin` is then true; `reason` says why it was chosen), or "custom"
    for source given directly. `is_default` is true when the model had no template and a built-in stands in.
    """

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "", name: str = "custom",
                 from_file: bool = False, builtin: bool = False, reason: str = "") -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.name = name
        self.from_file = from_file
        self.builtin = builtin
        self.reason = reason
        jinja2 = _jinja2()
        try:
            self._template = _compile(source)
        except jinja2.TemplateSyntaxError as exc:
            raise ChatTemplateError(f"chat template does not parse (line {exc.lineno}): {exc.message}") from exc

    @property
    def is_default(self) -> bool:
        return self.builtin and not self.from_file

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any], name: str | None = None) -> ChatTemplate:
        """The template stored in GGUF metadata (`name` picks `tokenizer.chat_template.<name>`), else the built-in
        format that suits the model's vocabulary."""
        key = _TEMPLATE_KEY if name is None else f"{_TEMPLATE_KEY}.{name}"
        source = metadata.get(key)
        if name is not None and source is None:
            raise ChatTemplateError(f"the model has no chat template named {name!r} (no {key} in its metadata)")
        if source is not None and not isinstance(source, str):
            raise ChatTemplateError(f"{key} must be a string, not {type(source).__name__}")
        bos = _token_text(metadata, "tokenizer.ggml.bos_token_id")
        eos = _token_text(metadata, "tokenizer.ggml.eos_token_id")
        if source is None:
            builtin, reason = choose_builtin(metadata)
            # Built-ins write BOS only when the vocabulary adds one, which is when llama.cpp adds it to them.
            return cls.builtin_template(builtin, bos_token=bos if adds_bos(metadata) else "", eos_token=eos,
                                        reason=reason)
        return cls(source, bos_token=bos, eos_token=eos, name=key, from_file=True)

    @classmethod
    def builtin_template(cls, name: str, *, bos_token: str = "", eos_token: str = "",
                         reason: str = "") -> ChatTemplate:
        """One of the built-in formats by name (see `BUILTIN_TEMPLATES`); `bos_token` opens the prompt."""
        source = BUILTIN_TEMPLATES.get(name)
        if source is None:
            raise ChatTemplateError(f"no built-in chat template {name!r}; known: {', '.join(BUILTIN_TEMPLATES)}")
        return cls(source, bos_token=bos_token, eos_token=eos_token, name=name, builtin=True, reason=reason)

    def describe(self) -> str:
        """One line for people: which template this is and where it came from."""
        if self.from_file:
            return f"{self.name} from the model file"
        if self.builtin:
            why = f"; {self.reason}" if self.reason else ""
            return f"built-in {self.name} template (the model file has none{why})"
        return "a custom template"

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        budget: RenderBudget | None = None,
        **extra: Any,
    ) -> str:
        """The prompt text for `messages`; with `add_generation_prompt` it ends where the assistant should speak.

        The render may do the work `budget` allows (a default `RenderBudget` when not given; it tells afterwards
        what was spent) and raises TemplateBudgetError past it."""
        variables: dict[str, Any] = {
            **extra,
            "messages": validate_messages(messages),
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
        }
        if tools is not None:
            variables["tools"] = _validate_tools(tools)
        jinja2 = _jinja2()
        token = render_budget.start(budget or RenderBudget())
        try:
            return self._template.render(variables)
        except TemplateBudgetError as exc:
            raise TemplateBudgetError(f"chat template {self.name} went past what one render may do: {exc}") from None
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(f"chat template failed: {exc.message or type(exc).__name__}") from exc
        except Exception as exc:  # a template can trip any Python error, e.g. `'a' + none`; all mean "cannot render"
            raise ChatTemplateError(f"chat template failed: {type(exc).__name__}: {exc}") from exc
        finally:
            render_budget.finish(token)


# The variables a template receives from `render` itself: extra variables may not replace them.
_OWN_VARIABLES = frozenset({"messages", "add_generation_prompt", "tools", "bos_token", "eos_token", "budget"})
# Extra variables the templates in the wild read as switches; the string "false" would read as true.
_BOOLEAN_VARIABLES = frozenset({"enable_thinking", "thinking", "add_vision_id"})


def template_variables(extra: Any, param: str = "chat_template_kwargs") -> dict[str, Any]:
    """The extra variables a caller passes to a template (vLLM's `chat_template_kwargs`), checked: an object of
    string keys that neither replace the template's own arguments nor its helpers (`raise_exception`, `range`,
    `namespace`...), with switches such as `enable_thinking` given as booleans. Errors name `param`."""
    if extra is None:
        return {}
    if not isinstance(extra, Mapping) or not all(isinstance(key, str) for key in extra):
        raise FieldError(f"`{param}` must be an object of template variables", param)
    for key, value in extra.items():
        if key in _OWN_VARIABLES or key in jinja_environment().globals:
            raise FieldError(f"`{param}` may not set {key!r}: the chat template gets it from the request (or it "
                             "is one of the template's own helpers)", param)
        if key in _BOOLEAN_VARIABLES and not isinstance(value, bool):
            raise FieldError(f"`{param}.{key}` must be true or false, not {json.dumps(value)[:40]}", param)
    return dict(extra)


def render_chat(
    metadata_or_template: Mapping[str, Any] | ChatTemplate | str,
    messages: Sequence[Mapping[str, Any]],
    add_generation_prompt: bool = True,
    tools: Sequence[Mapping[str, Any]] | None = None,
    **extra: Any,
) -> str:
    """One-call rendering from GGUF metadata, a ChatTemplate, or bare template source."""
    if isinstance(metadata_or_template, ChatTemplate):
        template = metadata_or_template
    elif isinstance(metadata_or_template, str):
        template = ChatTemplate(metadata_or_template)
    else:
        template = ChatTemplate.from_metadata(metadata_or_template)
    return template.render(messages, add_generation_prompt=add_generation_prompt, tools=tools, **extra)


def validate_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Check roles and content and return fresh message dicts with text content.

    Accepted content: a string; a list of OpenAI-style text parts (`{"type": "text", "text": ...}`), joined into one
    string; or None/absent on an assistant message that carries `tool_calls`.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ChatTemplateError(f"messages must be a list of objects, not {type(messages).__name__}")
    if not messages:
        raise ChatTemplateError("messages is empty: a chat needs at least one message")
    return [_validate_message(i, message) for i, message in enumerate(messages)]


def _validate_message(index: int, message: Any) -> dict[str, Any]:
    where = f"messages[{index}]"
    if not isinstance(message, Mapping):
        raise ChatTemplateError(f"{where} must be an object with 'role' and 'content', not {type(message).__name__}")
    role = message.get("role")
    if not isinstance(role, str):
        raise ChatTemplateError(f"{where} needs a string 'role' (one of {', '.join(sorted(ROLES))})")
    if role not in ROLES:
        raise ChatTemplateError(f"{where} has unknown role {role!r}; expected one of {', '.join(sorted(ROLES))}")
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        if role != "assistant":
            raise ChatTemplateError(f"{where}: only assistant messages carry 'tool_calls', not {role!r} ones")
        if isinstance(tool_calls, (str, bytes)) or not isinstance(tool_calls, Sequence) or not all(
            isinstance(call, Mapping) for call in tool_calls
        ):
            raise ChatTemplateError(f"{where}.tool_calls must be a list of objects")
    content = message.get("content")
    if content is None:
        if tool_calls is None:
            raise ChatTemplateError(f"{where} ({role}) has no 'content'")
    elif isinstance(content, str):
        pass
    elif isinstance(content, Sequence) and not isinstance(content, bytes):
        content = "".join(_text_part(f"{where}.content[{j}]", part) for j, part in enumerate(content))
    else:
        raise ChatTemplateError(
            f"{where}.content must be a string or a list of text parts, not {type(content).__name__}"
        )
    return {**message, "content": content}


def _text_part(where: str, part: Any) -> str:
    if not isinstance(part, Mapping):
        raise ChatTemplateError(f"{where} must be an object like {{'type': 'text', 'text': '...'}}")
    kind = part.get("type")
    if kind != "text":
        raise ChatTemplateError(f"{where} has type {kind!r}; only 'text' parts are supported (text-only models)")
    text = part.get("text")
    if not isinstance(text, str):
        raise ChatTemplateError(f"{where} needs a string 'text'")
    return text


def _validate_tools(tools: Any) -> list[Any]:
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence) or not all(
        isinstance(tool, Mapping) for tool in tools
    ):
        raise ChatTemplateError("tools must be a list of objects (JSON schema function descriptions)")
    return list(tools)


def _token_text(metadata: Mapping[str, Any], id_key: str) -> str:
    """The text of a special token given by id, or '' when the vocabulary does not say."""
    token_id = metadata.get(id_key)
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(token_id, int) or tokens is None or not 0 <= token_id < len(tokens):
        return ""
    text = tokens[token_id]
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)


def _jinja2() -> Any:
    try:
        import jinja2
    except ImportError as exc:
        raise ChatTemplateError("rendering chat templates needs jinja2 (pip install 'jinja2>=3.1')") from exc
    return jinja2


@functools.cache
def jinja_environment() -> Any:
    """The one Jinja environment all templates compile in (built on first use)."""
    _jinja2()  # a clear error when jinja2 is missing
    from jinja2 import nodes, pass_context
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    class Sandbox(ImmutableSandboxedEnvironment):
        """Jinja's sandbox answers a forbidden attribute with an undefined value that only fails when used further,
        so `{{ f.__globals__ }}` would quietly print nothing. A template that reaches for internals is broken or
        hostile either way: refuse it on the spot. Calls and the operators that can build large values are charged
        to the render's budget (and intercepted operators are never folded at compile time)."""

        intercepted_binops = frozenset({"*", "**", "+", "%"})

        def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
            raise SecurityError(f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe")

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            budget = render_budget.current()
            render_budget.check_binop(budget, operator, left, right)
            return budget.produced(super().call_binop(context, operator, left, right))

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - Jinja's
            budget = render_budget.current()
            budget.enter()
            try:
                args = render_budget.check_string_method(budget, __obj, args, kwargs)
                return budget.produced(super().call(__context, __obj, *args, **kwargs))
            finally:
                budget.leave()

    class GenerationBlocks(Extension):
        """`{% generation %}...{% endgeneration %}` marks assistant text for training masks; rendering ignores it."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    @pass_context
    def finalize(context: Any, value: Any) -> str:
        """Every `{{ }}` output, counted (pass_context keeps Jinja from finalizing constants at compile time)."""
        text = str(value)
        render_budget.current().characters(len(text))
        return text

    environment = Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, GenerationBlocks],
                          optimized=False, finalize=finalize)
    environment.filters["tojson"] = _tojson
    environment.filters = {name: render_budget.budgeted_filter(name, f) for name, f in environment.filters.items()}
    environment.filters[_EACH] = render_budget.each
    environment.filters[_CONCAT] = render_budget.concat
    environment.globals["lipsum"] = render_budget.budgeted_lipsum(environment.globals["lipsum"])
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    return environment


# The filters that every `{% for %}` and `~` go through (see _compile); not names templates use.
_EACH = "llmchat_budgeted_loop"
_CONCAT = "llmchat_budgeted_concat"


def _compile(source: str) -> Any:
    """Compile template source with each loop and each `~` charging the render's budget.

    A loop iteration costs one operation and the literal text its body may emit, so that a loop writing a large
    block of template text runs out of budget as fast as one printing large values. `~` is Jinja's own string
    join, which the sandbox does not intercept."""
    from jinja2 import nodes
    from jinja2.visitor import NodeTransformer

    class Charged(NodeTransformer):
        def visit_For(self, node: Any) -> Any:
            self.generic_visit(node)
            literal = sum(len(data.data) for data in node.find_all(nodes.TemplateData))
            node.iter = nodes.Filter(node.iter, _EACH, [nodes.Const(literal)], [], None, None, lineno=node.lineno)
            return node

        def visit_Concat(self, node: Any) -> Any:
            self.generic_visit(node)
            return nodes.Filter(nodes.List(node.nodes), _CONCAT, [], [], None, None, lineno=node.lineno)

    environment = jinja_environment()
    tree = Charged().visit(environment.parse(source))
    return environment.template_class.from_code(environment, environment.compile(tree),
                                                environment.make_globals(None))


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Jinja's own tojson HTML-escapes `<`, `>`, `&`, `'` — right for web pages, wrong for prompts.
    def dumps(indent: int | str | None) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    width = len(indent) if isinstance(indent, str) else indent if type(indent) is int else 0
    if width > 1:
        # The indented size, known from a one-space rendering before a wide indent multiplies it.
        probe = dumps(1)
        depth = sum(len(line) - len(line.lstrip(" ")) for line in probe.split("\n"))
        render_budget.current().characters(len(probe) + depth * (width - 1))
    return dumps(indent)


def _raise_exception(message: str) -> None:
    raise _jinja2().TemplateError(message)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)
