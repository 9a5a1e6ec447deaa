"""JSON Schema to GBNF: a grammar whose documents all validate against the schema.

The grammar is deliberately narrower than the schema in *form*, never wider in *content*:
- object properties come in the order the schema declares them (required ones always, optional ones as any
  ordered subset); additional properties, where allowed, come after the declared ones;
- whitespace is bounded: nothing, one space or tab, or one newline and up to 40 spaces/tabs of indentation, and
  only after `{ [ , :` , before `}` `]` and between a key and its `:`, so a model cannot loop on it;
- numbers have at most 16 integer digits, 18 fraction digits and a 4-digit exponent; numbers with bounds are
  written without an exponent; strings never hold raw control characters or DEL (they are escaped).
Every keyword that constrains documents is either enforced or refused: UnsupportedSchemaError lists every such
keyword by JSON-pointer path. Annotations (title, description, default, examples...) are ignored.
"""
from __future__ import annotations

import json
import math
import re

from ..errors import GrammarError, UnsupportedSchemaError
from .regex import MAX_REPEAT, emit, literal, parse_regex

WS = '([ \\t] | "\\r"? "\\n" [ \\t]{0,40})?'
INT_DIGITS = 16  # integer part of any number: at most this many digits
MAX_INT = 10 ** INT_DIGITS - 1
FRAC_DIGITS = 18

# name -> body; bodies name other primitives by these exact names (reserved: schema-derived names avoid them).
_PRIMITIVES = {
    "ws": WS,
    "hex": "[0-9a-fA-F]",
    # a \u escape: any code point but a lone surrogate; a high surrogate must be followed by a low one
    "uescape": '[0-9a-cA-Ce-fE-F] hex{3} | [dD] [0-7] hex{2} | [dD] [89abAB] hex{2} "\\\\u" [dD] [c-fC-F] hex{2}',
    "char": '[^"\\\\\\x00-\\x1F\\x7F] | "\\\\" (["\\\\/bfnrt] | "u" uescape)',
    "string": '"\\"" char* "\\""',
    "int-part": '"0" | [1-9] [0-9]{0,%d}' % (INT_DIGITS - 1),
    "frac": '"." [0-9]{1,%d}' % FRAC_DIGITS,
    "integer": '"-"? int-part',
    "number": '"-"? int-part frac? ([eE] [-+]? [0-9]{1,4})?',
    "boolean": '"true" | "false"',
    "null": '"null"',
    "value": "object | array | string | number | boolean | null",
    "member": 'string ws ":" ws value',
    "object": '"{" ws (member ("," ws member)* ws)? "}"',
    "array": '"[" ws (value ("," ws value)* ws)? "]"',
    "date": ('[0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])'
             ' | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02" "-" ("0" [1-9] | [12] [0-9]))'),
    "time": ('([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" ([0-5] [0-9] | "60") ("." [0-9]{1,9})?'
             ' ([Zz] | [-+] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])'),
    "date-time": "date [Tt] time",
    "uuid": 'hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12}',
}
_DEPS = {
    "uescape": ["hex"], "char": ["uescape"], "string": ["char"], "integer": ["int-part"],
    "number": ["int-part", "frac"], "value": ["object", "array", "string", "number", "boolean", "null"],
    "member": ["string", "ws", "value"], "object": ["ws", "member"], "array": ["ws", "value"],
    "date-time": ["date", "time"], "uuid": ["hex"],
}
_FORMATS = {"date", "time", "date-time", "uuid"}

ANNOTATIONS = {
    "title", "description", "examples", "default", "$schema", "$id", "id", "$comment", "deprecated", "readOnly",
    "writeOnly", "discriminator", "$anchor", "$dynamicAnchor", "$vocabulary", "contentMediaType",
    "contentEncoding", "example", "externalDocs", "xml",
}
_CONTAINERS = {"$defs", "definitions"}
# Keywords that constrain documents and that this converter does not enforce.
_UNSUPPORTED = {
    "multipleOf", "contains", "minContains", "maxContains", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies", "if", "then",
    "else", "not", "unevaluatedItems", "$dynamicRef", "$recursiveRef", "contentSchema",
}
_NO_OP_VALUES = {"uniqueItems": False, "unevaluatedProperties": True, "additionalItems": True}
_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
_TYPE_KEYWORDS = {
    "object": {"properties", "required", "additionalProperties"},
    "array": {"items", "prefixItems", "minItems", "maxItems", "additionalItems", "uniqueItems"},
    "string": {"minLength", "maxLength", "pattern", "format"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
}
_RESERVED = set(_PRIMITIVES) | {"root"}


def _pointer(path: str, key) -> str:
    return f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"


def _type_of(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise GrammarError(f"not a JSON value: {value!r}")


def _types_match(value, types: set[str]) -> bool:
    t = _type_of(value)
    return t in types or (t == "integer" and "number" in types)


class _Rules:
    """The rule table shared by every schema of one grammar."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def primitive(self, name: str) -> str:
        if name not in self.rules:
            self.rules[name] = _PRIMITIVES[name]
            for dep in _DEPS.get(name, ()):
                self.primitive(dep)
        return name

    def add(self, hint: str, body: str) -> str:
        name = re.sub(r"[^a-zA-Z0-9-]+", "-", hint).strip("-") or "schema"
        if name in _RESERVED:
            name += "-"
        candidate, i = name, 0
        while candidate in self.rules and self.rules[candidate] != body:
            i += 1
            candidate = f"{name}{i}"
        self.rules[candidate] = body
        return candidate

    def reserve(self, hint: str, key: str) -> str:
        """A fresh rule name whose body comes later (a recursive $ref)."""
        return self.add(hint, "\0pending " + key)

    def gbnf(self) -> str:
        pending = [n for n, b in self.rules.items() if b.startswith("\0")]
        if pending:
            raise GrammarError(f"internal: rules never defined: {pending}")
        return "".join(f"{name} ::= {body}\n" for name, body in self.rules.items())


class _Converter:
    def __init__(self, rules: _Rules, document, prefix: str) -> None:
        self.r = rules
        self.doc = document
        self.prefix = prefix
        self.refs: dict[str, str] = {}
        self.unsupported: list[str] = []
        self.inlining: list[str] = []  # $refs being merged into an allOf, to refuse an endless merge

    def fail(self, path: str, message: str) -> GrammarError:
        return GrammarError(f"JSON schema at {path or '/'} (root): {message}" if not path else
                            f"JSON schema at {path}: {message}")

    def refuse(self, path: str) -> None:
        if path not in self.unsupported:
            self.unsupported.append(path)

    def hint(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}" if self.prefix and suffix else (self.prefix or suffix or "value")

    # ------------------------------------------------------------------------------------------------ refs
    def resolve(self, ref, path: str):
        if not isinstance(ref, str):
            raise self.fail(path, "$ref must be a string")
        if ref != "#" and not ref.startswith("#/"):
            raise UnsupportedSchemaError(
                f"JSON schema at {path}: $ref {ref!r} is not a reference inside this schema (only '#/...' is "
                f"supported; no documents are fetched)", [path])
        target = self.doc
        for raw in ref[2:].split("/") if ref != "#" else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            part = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), part)
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise self.fail(path, f"$ref {ref!r} points to nothing ({part!r} not found)")
        return target

    def ref_rule(self, ref: str, path: str) -> str:
        if ref in self.refs:
            return self.refs[ref]
        target = self.resolve(ref, path)
        name = self.r.reserve(self.hint("ref-" + ref[2:].replace("/", "-") if ref != "#" else "ref-root"), ref)
        self.refs[ref] = name
        body = self.visit(target, ref[1:], name)
        if body == name:
            raise self.fail(path, f"$ref {ref!r} refers to itself without consuming anything")
        self.r.rules[name] = body
        return name

    # ------------------------------------------------------------------------------------------------ visit
    def rule(self, schema, path: str, hint: str) -> str:
        """A rule name (or primitive name) for the schema."""
        body = self.visit(schema, path, hint)
        if re.fullmatch(r"[a-zA-Z0-9-]+", body):
            return body
        return self.r.add(hint, body)

    def visit(self, schema, path: str, hint: str) -> str:
        """A GBNF expression for documents of `schema`."""
        if schema is True:
            return self.r.primitive("value")
        if schema is False:
            raise self.fail(path, "the schema `false` accepts no document")
        if not isinstance(schema, dict):
            raise self.fail(path, f"a schema must be an object or a boolean, not {type(schema).__name__}")
        for key, value in schema.items():
            if key in _UNSUPPORTED or (key in _NO_OP_VALUES and value != _NO_OP_VALUES[key]):
                if key == "additionalItems" and isinstance(schema.get("items"), list):
                    continue  # handled with the tuple form of items
                self.refuse(_pointer(path, key))
        if schema.get("nullable") is True:
            rest = {k: v for k, v in schema.items() if k != "nullable"}
            return self.alternatives([rest, {"type": "null"}], [path, path + "/nullable"], hint)
        constraining = {k for k in schema if k not in ANNOTATIONS and k not in _CONTAINERS and k != "nullable"}
        if "$ref" in schema:
            if constraining - {"$ref"}:
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                return self.visit(self.merge([{"$ref": schema["$ref"]}, rest], path), path, hint)
            return self.ref_rule(schema["$ref"], _pointer(path, "$ref"))
        if "allOf" in schema:
            parts = schema["allOf"]
            if not isinstance(parts, list) or not parts:
                raise self.fail(_pointer(path, "allOf"), "allOf must be a non-empty array")
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            return self.visit(self.merge([rest, *parts], _pointer(path, "allOf")), path, hint)
        if "anyOf" in schema and "oneOf" in schema:
            self.refuse(_pointer(path, "oneOf"))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                alts = schema[key]
                if not isinstance(alts, list) or not alts:
                    raise self.fail(_pointer(path, key), f"{key} must be a non-empty array")
                rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
                rest_constrains = any(k not in ANNOTATIONS and k not in _CONTAINERS for k in rest)
                options = [self.merge([rest, a], _pointer(_pointer(path, key), i)) if rest_constrains else a
                           for i, a in enumerate(alts)]
                if key == "oneOf" and not self.disjoint(options):
                    self.refuse(_pointer(path, key))
                paths = [_pointer(_pointer(path, key), i) for i in range(len(alts))]
                return self.alternatives(options, paths, hint)
        return self.typed(schema, path, hint)

    def alternatives(self, options: list, paths: list[str], hint: str) -> str:
        names = [self.rule(o, p, f"{hint}-{i}") for i, (o, p) in enumerate(zip(options, paths))]
        unique = list(dict.fromkeys(names))
        return unique[0] if len(unique) == 1 else " | ".join(unique)

    def declared_types(self, schema: dict, path: str) -> list[str]:
        t = schema.get("type")
        if t is None:
            return [ty for ty in ("object", "array", "string", "number") if _TYPE_KEYWORDS[ty] & set(schema)] or []
        types = [t] if isinstance(t, str) else t
        if not isinstance(types, list) or not types or any(x not in _TYPES for x in types):
            raise self.fail(_pointer(path, "type"), f"type must be one of {', '.join(_TYPES)} or a list of them")
        if "number" in types and "integer" in types:
            types = [x for x in types if x != "integer"]
        return list(dict.fromkeys(types))

    def typed(self, schema: dict, path: str, hint: str) -> str:
        types = self.declared_types(schema, path)
        if "const" in schema or "enum" in schema:
            return self.enum(schema, path, types)
        if not types:
            return self.r.primitive("value")
        alts = []
        for t in types:
            if t in ("boolean", "null"):
                alts.append(self.r.primitive(t))
                continue
            body = getattr(self, "t_" + t)(schema, path, hint if len(types) == 1 else f"{hint}-{t}")
            if len(types) > 1 and not re.fullmatch(r"[a-zA-Z0-9-]+", body):
                body = self.r.add(f"{hint}-{t}", body)
            alts.append(body)
        return " | ".join(alts)

    # ------------------------------------------------------------------------------------------------ values
    def enum(self, schema: dict, path: str, types: list[str]) -> str:
        if "const" in schema:
            values, where = [schema["const"]], _pointer(path, "const")
        else:
            values, where = schema["enum"], _pointer(path, "enum")
            if not isinstance(values, list) or not values:
                raise self.fail(where, "enum must be a non-empty array")
            if "const" in schema:
                values = [v for v in values if v == schema["const"]]
        rest = {k: v for k, v in schema.items() if k not in ("const", "enum", "type")
                and k not in ANNOTATIONS and k not in _CONTAINERS}
        kept = [v for v in values if (not types or _types_match(v, set(types))) and _simple_valid(v, rest, self)]
        for k in rest:
            if k not in _SIMPLE_KEYWORDS and k not in _UNSUPPORTED:
                self.refuse(_pointer(path, k))  # not checked against the listed values
        if not kept:
            raise self.fail(where, "no value of the enum/const satisfies the schema's other keywords")
        alts = list(dict.fromkeys(self.const(v) for v in kept))
        return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"

    def const(self, value) -> str:
        if value is None:
            return '"null"'
        if value is True:
            return '"true"'
        if value is False:
            return '"false"'
        if isinstance(value, int):
            return literal(str(value))
        if isinstance(value, float):
            if not math.isfinite(value):
                raise GrammarError(f"not a JSON number: {value!r}")
            forms = [repr(value)]
            if value.is_integer():
                forms.append(str(int(value)))
            return "(" + " | ".join(literal(f) for f in dict.fromkeys(forms)) + ")" if len(forms) > 1 else literal(forms[0])
        if isinstance(value, str):
            return string_literal(value)
        ws = self.r.primitive("ws")
        if isinstance(value, list):
            if not value:
                return f'"[" {ws} "]"'
            items = f' "," {ws} '.join(self.const(v) for v in value)
            return f'"[" {ws} {items} {ws} "]"'
        if isinstance(value, dict):
            if not value:
                return f'"{{" {ws} "}}"'
            members = f' "," {ws} '.join(f"{string_literal(k)} {ws} \":\" {ws} {self.const(v)}"
                                         for k, v in value.items())
            return f'"{{" {ws} {members} {ws} "}}"'
        raise GrammarError(f"not a JSON value: {value!r}")

    # ------------------------------------------------------------------------------------------------ types
    def t_integer(self, schema: dict, path: str, hint: str) -> str:
        lo, hi = self.int_bounds(schema, path)
        if lo is None and hi is None:
            return self.r.primitive("integer")
        lo = -MAX_INT if lo is None else lo
        hi = MAX_INT if hi is None else hi
        if lo > hi:
            raise self.fail(path, "the integer bounds admit no value")
        if lo < -MAX_INT or hi > MAX_INT:
            self.refuse(path + "/minimum" if lo < -MAX_INT else path + "/maximum")
        return "(" + int_range(max(lo, -MAX_INT), min(hi, MAX_INT)) + ")"

    def bounds(self, schema: dict, path: str):
        """(low, low exclusive, high, high exclusive), each side None when absent (drafts 4 and 6+ forms)."""
        out = []
        for plain, excl in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
            bound, is_excl = schema.get(plain), False
            for key in (plain, excl):
                v = schema.get(key)
                if v is not None and not isinstance(v, bool) and not isinstance(v, (int, float)):
                    raise self.fail(_pointer(path, key), f"{key} must be a number")
            e = schema.get(excl)
            if e is True:
                is_excl = bound is not None
            elif isinstance(e, (int, float)) and not isinstance(e, bool):
                tighter = bound is None or (e >= bound if plain == "minimum" else e <= bound)
                if tighter:
                    bound, is_excl = e, True
            out += [bound, is_excl]
        return out

    def int_bounds(self, schema: dict, path: str):
        lo, lo_x, hi, hi_x = self.bounds(schema, path)
        if lo is not None:
            lo = math.floor(lo) + 1 if lo_x else math.ceil(lo)
        if hi is not None:
            hi = math.ceil(hi) - 1 if hi_x else math.floor(hi)
        return lo, hi

    def t_number(self, schema: dict, path: str, hint: str) -> str:
        lo, lo_x, hi, hi_x = self.bounds(schema, path)
        if lo is None and hi is None:
            return self.r.primitive("number")
        for key, v in (("minimum", lo), ("maximum", hi)):
            if v is not None and not float(v).is_integer():
                keys = [k for k in (key, "exclusive" + key[0].upper() + key[1:]) if schema.get(k) == v]
                for k in keys:
                    self.refuse(_pointer(path, k))
                return self.r.primitive("number")
        return "(" + number_range(None if lo is None else int(lo), lo_x, None if hi is None else int(hi), hi_x,
                                  self) + ")"

    def t_string(self, schema: dict, path: str, hint: str) -> str:
        fmt, pattern = schema.get("format"), schema.get("pattern")
        lo, hi = schema.get("minLength", 0), schema.get("maxLength")
        for key, v in (("minLength", lo), ("maxLength", hi)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise self.fail(_pointer(path, key), f"{key} must be a non-negative integer")
        has_len = lo > 0 or hi is not None
        if fmt is not None and fmt not in _FORMATS:
            self.refuse(_pointer(path, "format"))
            fmt = None
        if (fmt is not None) + (pattern is not None) + has_len > 1:
            # each is enforced alone; their intersection is not computed
            for key in ("pattern", "minLength", "maxLength"):
                if key in schema and (key != "minLength" or lo > 0):
                    self.refuse(_pointer(path, key))
            return self.r.primitive("string")
        if fmt is not None:
            return f'"\\"" {self.r.primitive(fmt)} "\\""'
        if pattern is not None:
            if not isinstance(pattern, str):
                raise self.fail(_pointer(path, "pattern"), "pattern must be a string")
            try:
                regex = parse_regex(pattern)
            except GrammarError as e:
                raise GrammarError(f"JSON schema at {_pointer(path, 'pattern')}: {e}") from None
            body = emit(regex.tree, json_string=True)
            anything = "char*"
            self.r.primitive("char")
            parts = ([] if regex.anchored_start else [anything]) + ([body] if body else []) + \
                    ([] if regex.anchored_end else [anything])
            return '"\\"" ' + (" ".join(f"({p})" if "|" in p else p for p in parts) or "") + ' "\\""'
        if has_len:
            if hi is not None and hi < lo:
                raise self.fail(path, "maxLength is below minLength")
            if max(lo, hi or 0) > MAX_REPEAT:
                self.refuse(_pointer(path, "maxLength" if (hi or 0) > MAX_REPEAT else "minLength"))
                return self.r.primitive("string")
            char = self.r.primitive("char")
            rep = f"{{{lo},{'' if hi is None else hi}}}" if hi != lo else f"{{{lo}}}"
            return f'"\\"" {char}{rep} "\\""'
        return self.r.primitive("string")

    def t_array(self, schema: dict, path: str, hint: str) -> str:
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        rest: object = True
        prefix_path = _pointer(path, "prefixItems")
        if isinstance(items, list):  # drafts 4-7 tuple form
            prefix, prefix_path = items, _pointer(path, "items")
            rest = schema.get("additionalItems", True)
            rest_path = _pointer(path, "additionalItems")
        else:
            rest = True if items is None else items
            rest_path = _pointer(path, "items")
        prefix = prefix or []
        if not isinstance(prefix, list):
            raise self.fail(prefix_path, "must be an array of schemas")
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        for key, v in (("minItems", lo), ("maxItems", hi)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise self.fail(_pointer(path, key), f"{key} must be a non-negative integer")
        if rest is False:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        if hi is not None and hi < lo:
            raise self.fail(path, "the array bounds admit no length")
        if max(lo, hi or 0) > MAX_REPEAT:
            self.refuse(_pointer(path, "maxItems" if (hi or 0) > MAX_REPEAT else "minItems"))
            hi = None if (hi or 0) > MAX_REPEAT else hi
        if not prefix and rest is True and lo == 0 and hi is None:
            return self.r.primitive("array")
        ws = self.r.primitive("ws")
        slots = [self.rule(s, _pointer(prefix_path, i), f"{hint}-{i}") for i, s in enumerate(prefix)]
        rest_rule = None
        if rest is not False and (hi is None or hi > len(prefix)):
            rest_rule = self.rule(rest, rest_path, f"{hint}-item")

        def tail(i: int) -> str:
            """Elements i.. after element i-1 was written (each starts with a comma)."""
            if i < len(prefix):
                if hi is not None and i >= hi:
                    return ""
                inner = f'"," {ws} {slots[i]}'
                more = tail(i + 1)
                inner = f"{inner} {more}" if more else inner
                return inner if i < lo else f"({inner})?"
            if rest_rule is None:
                return ""
            need = max(0, lo - i)
            most = None if hi is None else hi - i
            if most == 0:
                return ""
            return _repeat(f'("," {ws} {rest_rule})', need, most)

        first = slots[0] if prefix else rest_rule
        if first is None or hi == 0:  # only the empty array
            return f'"[" {ws} "]"'
        after = tail(1)
        body = f"{first} {after}".strip()
        if lo == 0:
            return f'"[" {ws} ({body} {ws})? "]"'
        return f'"[" {ws} {body} {ws} "]"'

    def t_object(self, schema: dict, path: str, hint: str) -> str:
        props = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(props, dict):
            raise self.fail(_pointer(path, "properties"), "properties must be an object")
        if not isinstance(required, list) or not all(isinstance(x, str) for x in required):
            raise self.fail(_pointer(path, "required"), "required must be an array of strings")
        extra = schema.get("additionalProperties", True)
        if not isinstance(extra, (bool, dict)):
            raise self.fail(_pointer(path, "additionalProperties"), "must be a boolean or a schema")
        if not props and extra is True and not required:
            return self.r.primitive("object")
        ws = self.r.primitive("ws")
        names, kvs, req = [], {}, []
        for name, sub in props.items():
            if sub is False:
                if name in required:
                    raise self.fail(_pointer(_pointer(path, "properties"), name), "a required property is `false`")
                continue
            value = self.rule(sub, _pointer(_pointer(path, "properties"), name), f"{hint}-{name}")
            kvs[name] = self.r.add(f"{hint}-{name}-kv", f'{string_literal(name)} {ws} ":" {ws} {value}')
            names.append(name)
            req.append(name in required)
        missing = [r for r in required if r not in props]
        if missing:
            if extra is False:
                raise self.fail(_pointer(path, "required"),
                                f"required properties {missing} are not allowed (additionalProperties is false)")
            for r_name in missing:  # required but undeclared: any value, declared after the others
                value = self.rule(extra, _pointer(path, "additionalProperties"), f"{hint}-{r_name}")
                kvs[r_name] = self.r.add(f"{hint}-{r_name}-kv", f'{string_literal(r_name)} {ws} ":" {ws} {value}')
                names.append(r_name)
                req.append(True)
        extra_kv = None
        if extra is not False:
            value = self.rule(extra, _pointer(path, "additionalProperties"), f"{hint}-additional")
            key = self.r.add(f"{hint}-additional-key", _string_except(names, self.r)) if names \
                else self.r.primitive("string")
            extra_kv = self.r.add(f"{hint}-additional-kv", f'{key} {ws} ":" {ws} {value}')
        # rest(i): properties i.. after at least one was written; each starts with a comma
        rest_parts = []
        for i, name in enumerate(names):
            piece = f'"," {ws} {kvs[name]}'
            rest_parts.append(piece if req[i] else f"({piece})?")
        extra_tail = f'("," {ws} {extra_kv})*' if extra_kv else ""

        def rest(i: int) -> str:
            return " ".join(rest_parts[i:] + ([extra_tail] if extra_tail else []))

        # first(i): the first written property is at index >= i
        def first(i: int) -> str | None:
            if i == len(names):
                return f"{extra_kv} {extra_tail}" if extra_kv else None
            here = f"{kvs[names[i]]} {rest(i + 1)}".strip()
            if req[i]:
                return here
            later = first(i + 1)
            if later is None:
                return here
            later_rule = self.r.add(f"{hint}-from-{i + 1}", later) if i + 1 < len(names) else f"({later})"
            return f"{here} | {later_rule}"

        body = first(0)
        if body is None:
            return f'"{{" {ws} "}}"'
        inner = self.r.add(f"{hint}-members", body) if "|" in body else body
        if any(req):
            return f'"{{" {ws} {inner} {ws} "}}"'
        return f'"{{" {ws} ({inner} {ws})? "}}"'

    # ------------------------------------------------------------------------------------------------ allOf
    def merge(self, parts: list, path: str) -> dict:
        """One schema equivalent to all of `parts` (refs resolved one level), or refuse what cannot merge."""
        flat: list[dict] = []

        def add(part, where: str) -> None:
            if part is True:
                return
            if part is False:
                raise self.fail(where, "allOf contains `false`: no document can match")
            if not isinstance(part, dict):
                raise self.fail(where, "a schema must be an object or a boolean")
            part = dict(part)
            if "$ref" in part:
                ref = part.pop("$ref")
                if ref in self.inlining:
                    self.refuse(_pointer(where, "$ref"))  # a recursive schema inside allOf cannot be flattened
                    return
                self.inlining.append(ref)
                try:
                    add(self.resolve(ref, _pointer(where, "$ref")), ref[1:])
                finally:
                    self.inlining.pop()
            if "allOf" in part:
                for i, p in enumerate(part.pop("allOf")):
                    add(p, _pointer(_pointer(where, "allOf"), i))
            flat.append(part)

        for i, p in enumerate(parts):
            add(p, path)
        out: dict = {}
        objects = [p for p in flat if _TYPE_KEYWORDS["object"] & set(p)]
        for p in flat:
            for k, v in p.items():
                if k in ANNOTATIONS or k in _CONTAINERS or k in ("properties", "additionalProperties"):
                    continue
                if k not in out:
                    out[k] = v
                elif out[k] == v:
                    continue
                elif k == "type":
                    a = {out[k]} if isinstance(out[k], str) else set(out[k])
                    b = {v} if isinstance(v, str) else set(v)
                    both = (a & b) | ({"integer"} if ("integer" in a and "number" in b) or
                                      ("number" in a and "integer" in b) else set())
                    if not both:
                        raise self.fail(path, "allOf parts have no type in common")
                    out[k] = sorted(both) if len(both) > 1 else next(iter(both))
                elif k == "required":
                    out[k] = list(dict.fromkeys(list(out[k]) + list(v)))
                elif k == "enum":
                    out[k] = [x for x in out[k] if x in v]
                elif k in ("minimum", "minLength", "minItems"):
                    out[k] = max(out[k], v)
                elif k in ("maximum", "maxLength", "maxItems"):
                    out[k] = min(out[k], v)
                elif k in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(v, bool) \
                        and not isinstance(out[k], bool):
                    out[k] = max(out[k], v) if k == "exclusiveMinimum" else min(out[k], v)
                elif k == "items" and isinstance(v, dict) and isinstance(out[k], dict):
                    out[k] = {"allOf": [out[k], v]}
                else:
                    self.refuse(_pointer(path, k))
        if objects:
            names = list(dict.fromkeys(n for p in objects for n in p.get("properties", {})))
            props = {}
            for n in names:
                each = []
                for p in objects:
                    if n in p.get("properties", {}):
                        each.append(p["properties"][n])
                    elif "additionalProperties" in p:
                        each.append(p["additionalProperties"])
                if any(s is False for s in each):
                    props[n] = False
                else:
                    each = [s for s in each if s is not True]
                    props[n] = each[0] if len(each) == 1 else {"allOf": each} if each else True
            if props:
                out["properties"] = props
            extras = [p["additionalProperties"] for p in objects if "additionalProperties" in p]
            if any(e is False for e in extras):
                out["additionalProperties"] = False
            else:
                extras = [e for e in extras if e is not True]
                if extras:
                    out["additionalProperties"] = extras[0] if len(extras) == 1 else {"allOf": extras}
        return out

    # ------------------------------------------------------------------------------------------------ oneOf
    def disjoint(self, options: list) -> bool:
        """Whether no document can match two options (then oneOf is anyOf); proved by the types the options
        admit or a required property whose const/enum values differ."""
        summaries = [self.summary(o) for o in options]
        for i in range(len(options)):
            for j in range(i + 1, len(options)):
                (ti, ki), (tj, kj) = summaries[i], summaries[j]
                if ti is not None and tj is not None and not _types_overlap(ti, tj):
                    continue
                if any(n in kj and not (ki[n] & kj[n]) for n in ki):
                    continue
                return False
        return True

    def summary(self, schema, depth: int = 0):
        """(types or None for any, {required property: frozenset of its allowed const values as JSON text})."""
        if depth > 20 or not isinstance(schema, dict):
            return None, {}
        if "$ref" in schema and set(schema) - ANNOTATIONS - _CONTAINERS == {"$ref"}:
            try:
                return self.summary(self.resolve(schema["$ref"], ""), depth + 1)
            except GrammarError:
                return None, {}
        types = None
        if "type" in schema:
            t = schema["type"]
            types = {t} if isinstance(t, str) else set(t)
        if "const" in schema:
            types = {_type_of(schema["const"])}
        elif isinstance(schema.get("enum"), list):
            types = {_type_of(v) for v in schema["enum"]}
        keys = {}
        for n in schema.get("required", []):
            sub = schema.get("properties", {}).get(n)
            if isinstance(sub, dict) and "$ref" in sub:
                try:
                    sub = self.resolve(sub["$ref"], "")
                except GrammarError:
                    sub = None
            if isinstance(sub, dict) and "const" in sub:
                keys[n] = frozenset([json.dumps(sub["const"], sort_keys=True)])
            elif isinstance(sub, dict) and isinstance(sub.get("enum"), list):
                keys[n] = frozenset(json.dumps(v, sort_keys=True) for v in sub["enum"])
        return types, keys


def _types_overlap(a: set, b: set) -> bool:
    widen = lambda s: s | ({"integer"} if "number" in s else set())  # noqa: E731
    return bool(widen(a) & widen(b))


_SIMPLE_KEYWORDS = {"minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum",
                    "exclusiveMaximum", "minItems", "maxItems", "uniqueItems", "unevaluatedProperties",
                    "additionalItems"}


def _simple_valid(value, rest: dict, conv: _Converter) -> bool:
    """Whether an enum/const value meets the plain sibling keywords (those that are checked here)."""
    if isinstance(value, str):
        if len(value) < rest.get("minLength", 0) or len(value) > rest.get("maxLength", len(value)):
            return False
        if isinstance(rest.get("pattern"), str) and re.search(rest["pattern"], value) is None:
            return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, lo_x, hi, hi_x = conv.bounds(rest, "")
        if lo is not None and (value < lo or (lo_x and value == lo)):
            return False
        if hi is not None and (value > hi or (hi_x and value == hi)):
            return False
    if isinstance(value, list):
        if len(value) < rest.get("minItems", 0) or len(value) > rest.get("maxItems", len(value)):
            return False
    return True


# ---------------------------------------------------------------------------------------------------- strings
def string_literal(text: str) -> str:
    """GBNF for the JSON string `text` in each way a serializer commonly writes it: plain characters raw,
    `"` `\\` and controls escaped as json.dumps does (or as \\u00XX), non-ASCII raw or as \\uXXXX escapes."""
    from .regex import Chars
    parts: list[str] = []
    run = '"'
    for ch in text:
        cp = ord(ch)
        if 0x20 <= cp < 0x7F and ch not in '"\\':
            run += ch
            continue
        parts.append(literal(run))
        run = ""
        if cp < 0x80:
            parts.append(emit(Chars(((cp, cp),)), json_string=True))
        else:
            parts.append("(" + literal(ch) + " | " + _u_escapes(cp) + ")")
    parts.append(literal(run + '"'))
    return " ".join(p for p in parts if p != '""')


def _hex_gbnf(h: str) -> str:
    return " ".join(f"[{d}{d.upper()}]" if d.isalpha() else f'"{d}"' for d in h)


def _u_escapes(cp: int) -> str:
    if cp <= 0xFFFF:
        return '"\\\\u" ' + _hex_gbnf(f"{cp:04x}")
    v = cp - 0x10000
    hi, lo = 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)
    return '"\\\\u" ' + _hex_gbnf(f"{hi:04x}") + ' "\\\\u" ' + _hex_gbnf(f"{lo:04x}")


def _string_except(names: list[str], rules: _Rules) -> str:
    """A JSON string whose content is none of `names` (as written raw): a trie of the names that the string may
    leave at any point. An escape spelling of a name (\\u0061 for "a") is not excluded."""
    from .regex import JSON_RAW, _minus, char_class
    char = rules.primitive("char")
    trie: dict = {}
    for n in names:
        node = trie
        for ch in json.dumps(n, ensure_ascii=False)[1:-1]:
            node = node.setdefault(ch, {})
        node[None] = True

    def walk(node: dict) -> str:
        children = [(ch, sub) for ch, sub in node.items() if ch is not None]
        if not children:
            return f"{char}+"  # a whole name: at least one more character
        alts = [f"{literal(ch)} {walk(sub)}" for ch, sub in children]
        other = _minus(JSON_RAW, tuple((ord(ch), ord(ch)) for ch, _ in children))
        alts.append(f'({char_class(other)} | "\\\\" (["\\\\/bfnrt] | "u" uescape)) {char}*')
        body = "(" + " | ".join(alts) + ")"
        return body if None in node else body + "?"

    return f'"\\"" {walk(trie)} "\\""'


# ---------------------------------------------------------------------------------------------------- numbers
def _repeat(item: str, lo: int, hi: int | None) -> str:
    if hi is None:
        return f"{item}*" if lo == 0 else f"{item}+" if lo == 1 else f"{item}{{{lo},}}"
    if (lo, hi) == (0, 1):
        return f"{item}?"
    if lo == hi:
        return f"{item}{{{lo}}}"
    return f"{item}{{{lo},{hi}}}"


def _digits(lo: int, hi: int) -> str:
    return f"[{lo}]" if lo == hi else f"[{lo}-{hi}]"


def _fixed_range(x: str, y: str) -> str:
    """Digit strings of one length from x to y (x <= y), as unambiguous alternatives."""
    if x == y:
        return literal(x)
    k = 0
    while x[k] == y[k]:
        k += 1
    if k:
        inner = _fixed_range(x[k:], y[k:])
        return f"{literal(x[:k])} ({inner})" if "|" in inner else f"{literal(x[:k])} {inner}"
    n = len(x)
    if n == 1:
        return _digits(int(x), int(y))
    x0, y0, xr, yr = int(x[0]), int(y[0]), x[1:], y[1:]
    zeros, nines = "0" * (n - 1), "9" * (n - 1)
    alts = []
    if xr != zeros:
        inner = _fixed_range(xr, nines)
        alts.append(f'"{x0}" ({inner})' if "|" in inner else f'"{x0}" {inner}')
    lo_d = x0 if xr == zeros else x0 + 1
    hi_d = y0 if yr == nines else y0 - 1
    if lo_d <= hi_d:
        alts.append(f"{_digits(lo_d, hi_d)} " + _repeat("[0-9]", n - 1, n - 1).replace("{1}", ""))
    if yr != nines:
        inner = _fixed_range(zeros, yr)
        alts.append(f'"{y0}" ({inner})' if "|" in inner else f'"{y0}" {inner}')
    return " | ".join(alts)


def uint_range(a: int, b: int) -> str:
    """Decimal numerals (no leading zeros) of the integers a..b, 0 <= a <= b."""
    alts, full = [], []
    for length in range(len(str(a)), len(str(b)) + 1):
        first = 10 ** (length - 1) if length > 1 else 0
        last = 10 ** length - 1
        lo, hi = max(a, first), min(b, last)
        if lo > hi:
            continue
        if length > 1 and (lo, hi) == (first, last):
            full.append(length)
            continue
        alts.append(_fixed_range(str(lo), str(hi)))
    if full:  # consecutive whole lengths fold into one repetition
        alts.append("[1-9] " + _repeat("[0-9]", full[0] - 1, full[-1] - 1).replace("{1}", ""))
    return " | ".join(f"({x})" if "|" in x and len(alts) > 1 else x for x in alts)


def int_range(lo: int, hi: int) -> str:
    """Integer numerals from lo to hi; no "-0"."""
    alts = []
    if lo < 0:
        alts.append(f'"-" ({uint_range(max(1, -hi), -lo)})')
    if hi >= 0:
        alts.append(uint_range(max(0, lo), hi))
    return " | ".join(f"({x})" if "|" in x and len(alts) > 1 else x for x in alts)


def _magnitudes(a: int, a_x: bool, b: int | None, b_x: bool, conv: _Converter) -> list[str]:
    """Plain decimals m (no sign, no exponent) with a <= m <= b (exclusive where flagged; b None: unbounded)."""
    frac = conv.r.primitive("frac")
    top = MAX_INT if b is None else b
    alts = []
    lo_i, hi_i = (a + 1 if a_x else a), (top if b is None else top - 1)
    if lo_i <= hi_i:
        alts.append(f"({uint_range(lo_i, hi_i)}) {frac}?")
    if a_x and (b is None or a < b):
        alts.append(f'{literal(str(a))} "." "0"{{0,{FRAC_DIGITS - 1}}} [1-9] [0-9]{{0,{FRAC_DIGITS - 1}}}')
    if b is not None and not b_x and b >= a and not (a_x and a == b):
        alts.append(f'{literal(str(b))} ("." "0"{{1,{FRAC_DIGITS}}})?')
    return alts


def number_range(lo, lo_x, hi, hi_x, conv: _Converter) -> str:
    alts = []
    if lo is None or lo < 0:  # negatives: -m with m from max(-hi, 0) to -lo
        m_lo, m_lo_x = (0, False) if hi is None or hi > 0 else (-hi, hi_x)
        m_hi = None if lo is None else -lo
        if m_hi is None or m_lo < m_hi or (m_lo == m_hi and not m_lo_x and not lo_x):
            mags = _magnitudes(m_lo, m_lo_x, m_hi, bool(lo_x), conv)
            if mags:
                alts.append('"-" (' + " | ".join(mags) + ")")
    if hi is None or hi > 0 or (hi == 0 and not hi_x):
        a, a_x = (0, False) if lo is None or lo < 0 else (lo, lo_x)
        if hi is None or a < hi or (a == hi and not a_x and not hi_x):
            alts += _magnitudes(a, a_x, hi, bool(hi_x), conv)
    if not alts:
        raise GrammarError("JSON schema: the number bounds admit no value")
    return " | ".join(alts)


# ---------------------------------------------------------------------------------------------------- API
class SchemaRules:
    """Rules for several schemas in one grammar (tool calls): `add` each, then the caller writes its `root`."""

    def __init__(self) -> None:
        self._rules = _Rules()

    def add(self, schema, name: str) -> str:
        """The name of a rule that matches exactly the documents of `schema` written as described above."""
        return self._add(schema, name, "" if name == "root" else name)

    def _add(self, schema, name: str, prefix: str) -> str:
        if not re.fullmatch(r"[a-zA-Z0-9-]+", name or "") or (name in _RESERVED and name != "root"):
            raise GrammarError(f"rule name {name!r}: use letters, digits and '-', and none of {sorted(_RESERVED)}")
        if name in self._rules.rules:
            raise GrammarError(f"rule name {name!r} is already used in this grammar")
        snapshot = dict(self._rules.rules)
        self._rules.rules[name] = "\0pending " + name
        conv = _Converter(self._rules, schema, prefix=prefix)
        try:
            body = conv.visit(schema, "", conv.hint(""))
            if conv.unsupported:
                raise UnsupportedSchemaError(
                    "JSON schema keywords that constrain documents but are not supported: "
                    + ", ".join(conv.unsupported), list(conv.unsupported))
        except Exception:
            self._rules.rules = snapshot
            raise
        self._rules.rules[name] = body
        return name

    def gbnf(self) -> str:
        return self._rules.gbnf()


def schema_to_gbnf(schema) -> str:
    """A complete grammar (rule `root`) for the documents of `schema`."""
    rules = SchemaRules()
    rules.add(schema, "root")
    return rules.gbnf()


def json_object_gbnf() -> str:
    """Any JSON object at the top level ({"type": "json_object"})."""
    return schema_to_gbnf({"type": "object"})


JSON_GBNF: str = schema_to_gbnf(True)
