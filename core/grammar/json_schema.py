"""JSON Schema to GBNF: a grammar whose documents all validate against the schema.

The grammar is deliberately narrower than the schema in *form*, never wider in *content*:
- object properties come in the order the schema declares them (required ones always, optional ones as any
  ordered subset); additional properties, where allowed, come after the declared ones;
- whitespace is bounded: nothing, one space or tab, or one newline and up to 40 spaces/tabs of indentation, and
  only after `{ [ , :` , before `}` `]` and between a key and its `:`, so a model cannot loop on it;
- numbers have at most 309 integer digits (16 with bounds), 18 fraction digits and a 4-digit exponent; numbers
  with bounds are written without an exponent; an integer may end in `.0`; strings never hold raw control
  characters or DEL (they are escaped);
- a schema without "type" allows every type, each constrained by its own keywords ({"maxLength": 2} allows 5).
Every keyword that constrains documents is either enforced or refused: UnsupportedSchemaError lists every such
keyword by JSON-pointer path. Annotations (title, description, default, examples...) are ignored.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal

from ..errors import GrammarError, NoDocumentError, UnsupportedSchemaError
from .grammar import MAX_STACKS
from .json_text import (FORMATS, FRAC_DIGITS, MAX_INT, RESERVED, Rules, int_range, number_range, number_spellings, repeat,
                        string_except, string_literal)
from .regex import MAX_REPEAT, emit, literal, parse_regex
from .schema_document import (ANNOTATIONS, CONTAINERS, FRACTIONAL, MAX_DEPTH, NO_OP_VALUES, TYPE_KEYWORDS, TYPES,
                              UNSUPPORTED, UNTYPED, SchemaDocument, pointer, types_match)


class _Converter(SchemaDocument):
    """Writes one schema's GBNF into the rule table that the schemas of its grammar share."""

    def __init__(self, rules: Rules, document, prefix: str) -> None:
        super().__init__(document)
        self.r = rules
        self.prefix = prefix
        self.refs: dict[str, str] = {}
        self.depth = 0  # of the subschemas being visited

    def hint(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}" if self.prefix and suffix else (self.prefix or suffix or "value")

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
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:  # refused well before Python's recursion limit, at the path where it is
                raise self.fail(path, f"schemas nest more than {MAX_DEPTH} deep (subschemas and $ref chains)")
            return self._visit(schema, path, hint)
        finally:
            self.depth -= 1

    def _visit(self, schema, path: str, hint: str) -> str:
        if schema is True:
            return self.r.primitive("value")
        if schema is False:
            raise self.empty(path, "the schema `false` accepts no document")
        if not isinstance(schema, dict):
            raise self.fail(path, f"a schema must be an object or a boolean, not {type(schema).__name__}")
        if {"not", "if", "then", "else"} & set(schema):
            return self.conditional(schema, path, hint)
        for key, value in schema.items():
            if key in UNSUPPORTED or (key in NO_OP_VALUES and value != NO_OP_VALUES[key]):
                if key == "additionalItems" and isinstance(schema.get("items"), list):
                    continue  # handled with the tuple form of items
                self.refuse(pointer(path, key))
        if schema.get("nullable") is True:
            rest = {k: v for k, v in schema.items() if k != "nullable"}
            return self.alternatives([rest, {"type": "null"}], [path, path + "/nullable"], hint)
        constraining = {k for k in schema if k not in ANNOTATIONS and k not in CONTAINERS and k != "nullable"}
        if "$ref" in schema:
            if constraining - {"$ref"}:
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                return self.visit(self.merge([rest, {"$ref": schema["$ref"]}], path), path, hint)
            return self.ref_rule(schema["$ref"], pointer(path, "$ref"))
        if "allOf" in schema:
            parts = schema["allOf"]
            if not isinstance(parts, list) or not parts:
                raise self.fail(pointer(path, "allOf"), "allOf must be a non-empty array")
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            return self.visit(self.merge([rest, *parts], pointer(path, "allOf")), path, hint)
        if "anyOf" in schema and "oneOf" in schema:
            self.refuse(pointer(path, "oneOf"))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                alts = schema[key]
                if not isinstance(alts, list) or not alts:
                    raise self.fail(pointer(path, key), f"{key} must be a non-empty array")
                if len(alts) > MAX_STACKS:  # each alternative is a parse of its own from the first byte on
                    raise self.fail(pointer(path, key), f"{len(alts)} alternatives are more than the {MAX_STACKS} "
                                                        "simultaneous parses a grammar may hold")
                rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
                rest_constrains = any(k not in ANNOTATIONS and k not in CONTAINERS for k in rest)
                paths = [pointer(pointer(path, key), i) for i in range(len(alts))]
                options = []
                for a, where in zip(alts, paths):
                    try:
                        options.append(self.merge([rest, a], where) if rest_constrains else a)
                    except NoDocumentError:  # the alternative and the rest admit no document together
                        options.append(False)
                if key == "oneOf" and not self.disjoint([o for o in options if o is not False]):
                    self.refuse(pointer(path, key))
                return self.alternatives(options, paths, hint)
        return self.typed(schema, path, hint)

    def conditional(self, schema: dict, path: str, hint: str) -> str:
        """`not` as the complement of its schema, and `if`/`then`/`else` as two alternatives (documents that pass
        `if` and meet `then`, the others meeting `else`), where `negation` writes the complement; else refused."""
        rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else", "not")}
        if "not" in schema:
            negated = self.negation(schema["not"])
            if negated is None:
                self.refuse(pointer(path, "not"))
            elif negated is not True:
                rest = {"allOf": [rest, negated]}
        if "if" not in schema or ("then" not in schema and "else" not in schema):
            return self.visit(rest, path, hint)  # then or else without if, or if alone, constrain nothing
        negated = self.negation(schema["if"])
        if negated is None:
            self.refuse(pointer(path, "if"))
            return self.visit(rest, path, hint)
        branches = [{"allOf": [rest, schema["if"], schema.get("then", True)]},
                    {"allOf": [rest, negated, schema.get("else", True)]}]
        return self.alternatives(branches, [pointer(path, "then"), pointer(path, "else")], hint)

    def alternatives(self, options: list, paths: list[str], hint: str) -> str:
        names = [self.optional(o, p, f"{hint}-{i}") for i, (o, p) in enumerate(zip(options, paths))]
        unique = list(dict.fromkeys(n for n in names if n is not None))  # a branch no document satisfies adds nothing
        if not unique:
            raise self.empty(paths[0].rpartition("/")[0], "no alternative admits a document")
        return unique[0] if len(unique) == 1 else " | ".join(unique)

    def optional(self, schema, path: str, hint: str) -> str | None:
        """The rule for a part a document may do without (an alternative, a type, a property, an array position),
        or None where no document satisfies it: then the part is left out, and so are the rules the attempt made."""
        rules, refs = len(self.r.rules), len(self.refs)
        try:
            return self.rule(schema, path, hint)
        except NoDocumentError:
            for name in list(self.r.rules)[rules:]:
                del self.r.rules[name]
            for ref in list(self.refs)[refs:]:
                del self.refs[ref]
            return None

    def declared_types(self, schema: dict, path: str) -> list[str]:
        t = schema.get("type")
        if t is None:
            # Every type: a keyword constrains only documents of its type ({"maxLength": 2} allows 5). An empty
            # list means the schema's keywords constrain no type at all.
            return list(UNTYPED) if any(TYPE_KEYWORDS[ty] & set(schema) for ty in TYPE_KEYWORDS) else []
        types = [t] if isinstance(t, str) else t
        if not isinstance(types, list) or not types or any(x not in TYPES for x in types):
            raise self.fail(pointer(path, "type"), f"type must be one of {', '.join(TYPES)} or a list of them")
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
            if len(types) == 1:
                alts.append(getattr(self, "t_" + t)(schema, path, hint))
                continue
            body = self.optional({**schema, "type": t}, path, f"{hint}-{t}")
            if body is not None:  # {"minLength": 3, "maxLength": 1} still allows numbers
                alts.append(body)
        if not alts:
            raise self.empty(path, f"no type of {types} admits a document")
        return " | ".join(alts)

    # ------------------------------------------------------------------------------------------------ values
    def enum(self, schema: dict, path: str, types: list[str]) -> str:
        if "const" in schema:
            values, where = [schema["const"]], pointer(path, "const")
        else:
            values, where = schema["enum"], pointer(path, "enum")
            if not isinstance(values, list) or not values:
                raise self.fail(where, "enum must be a non-empty array")
            if "const" in schema:
                values = [v for v in values if v == schema["const"]]
        rest = {k: v for k, v in schema.items() if k not in ("const", "enum", "type")
                and k not in ANNOTATIONS and k not in CONTAINERS}
        kept = [v for v in values if (not types or types_match(v, set(types))) and _simple_valid(v, rest, self)]
        for k in rest:
            if k not in _SIMPLE_KEYWORDS and k not in UNSUPPORTED:
                self.refuse(pointer(path, k))  # not checked against the listed values
        if not kept:
            raise self.empty(where, "no value of the enum/const satisfies the schema's other keywords")
        alts = list(dict.fromkeys(self.const(v) for v in kept))
        return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"

    def const(self, value) -> str:
        if value is None:
            return '"null"'
        if value is True:
            return '"true"'
        if value is False:
            return '"false"'
        if isinstance(value, (int, float)):
            forms = number_spellings(value)
            return "(" + " | ".join(literal(f) for f in forms) + ")" if len(forms) > 1 else literal(forms[0])
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
            raise self.empty(path, "the integer bounds admit no value")
        if lo < -MAX_INT or hi > MAX_INT:
            self.refuse(path + "/minimum" if lo < -MAX_INT else path + "/maximum")
        return "(" + int_range(max(lo, -MAX_INT), min(hi, MAX_INT)) + f") {self.r.primitive('zero-frac')}?"

    def bounds(self, schema: dict, path: str):
        """(low, low exclusive, high, high exclusive), each side None when absent (drafts 4 and 6+ forms)."""
        out = []
        for plain, excl in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
            bound, is_excl = schema.get(plain), False
            for key in (plain, excl):
                v = schema.get(key)
                if v is not None and not isinstance(v, bool) and not isinstance(v, (int, float)):
                    raise self.fail(pointer(path, key), f"{key} must be a number")
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
        if schema.get(FRACTIONAL):  # the numbers that are not integers, as serializers write them
            return f'"-"? {self.r.primitive("int-part")} "." [0-9]{{0,{FRAC_DIGITS - 1}}} [1-9]'
        lo, lo_x, hi, hi_x = self.bounds(schema, path)
        if lo is None and hi is None:
            return self.r.primitive("number")
        for key, v in (("minimum", lo), ("maximum", hi)):
            if v is not None and not math.isfinite(v):
                raise self.fail(pointer(path, key), f"{key} must be a finite number")
        exact = [None if v is None else Decimal(v) if isinstance(v, int) else Decimal(repr(v)) for v in (lo, hi)]
        return "(" + number_range(exact[0], lo_x, exact[1], hi_x, self.r) + ")"

    def count(self, schema: dict, key: str, path: str, default: int | None = None) -> int | None:
        """A length bound: a non-negative integer (2.0 is one too)."""
        v = schema.get(key, default)
        if isinstance(v, float) and v.is_integer() and v >= 0:
            return int(v)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise self.fail(pointer(path, key), f"{key} must be a non-negative integer")
        return v

    def t_string(self, schema: dict, path: str, hint: str) -> str:
        fmt, pattern = schema.get("format"), schema.get("pattern")
        lo, hi = self.count(schema, "minLength", path, 0), self.count(schema, "maxLength", path)
        has_len = lo > 0 or hi is not None
        if fmt is not None and fmt not in FORMATS:
            self.refuse(pointer(path, "format"))
            fmt = None
        if (fmt is not None) + (pattern is not None) + has_len > 1:
            # each is enforced alone; their intersection is not computed
            for key in ("pattern", "minLength", "maxLength"):
                if key in schema and (key != "minLength" or lo > 0):
                    self.refuse(pointer(path, key))
            return self.r.primitive("string")
        if fmt is not None:
            return f'"\\"" {self.r.primitive(fmt)} "\\""'
        if pattern is not None:
            if not isinstance(pattern, str):
                raise self.fail(pointer(path, "pattern"), "pattern must be a string")
            try:
                regex = parse_regex(pattern)
            except GrammarError as e:
                raise GrammarError(f"JSON schema at {pointer(path, 'pattern')}: {e}") from None
            body = emit(regex.tree, json_string=True)
            anything = "char*"
            self.r.primitive("char")
            parts = ([] if regex.anchored_start else [anything]) + ([body] if body else []) + \
                    ([] if regex.anchored_end else [anything])
            return '"\\"" ' + (" ".join(f"({p})" if "|" in p else p for p in parts) or "") + ' "\\""'
        if has_len:
            if hi is not None and hi < lo:
                raise self.empty(path, "maxLength is below minLength")
            if max(lo, hi or 0) > MAX_REPEAT:
                self.refuse(pointer(path, "maxLength" if (hi or 0) > MAX_REPEAT else "minLength"))
                return self.r.primitive("string")
            char = self.r.primitive("char")
            rep = f"{{{lo},{'' if hi is None else hi}}}" if hi != lo else f"{{{lo}}}"
            return f'"\\"" {char}{rep} "\\""'
        return self.r.primitive("string")

    def t_array(self, schema: dict, path: str, hint: str) -> str:
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        rest: object = True
        prefix_path = pointer(path, "prefixItems")
        if isinstance(items, list):  # drafts 4-7 tuple form
            prefix, prefix_path = items, pointer(path, "items")
            rest = schema.get("additionalItems", True)
            rest_path = pointer(path, "additionalItems")
        else:
            rest = True if items is None else items
            rest_path = pointer(path, "items")
        prefix = prefix or []
        if not isinstance(prefix, list):
            raise self.fail(prefix_path, "must be an array of schemas")
        lo, hi = self.count(schema, "minItems", path, 0), self.count(schema, "maxItems", path)
        slots = []
        for i, s in enumerate(prefix[:hi]):
            slot = self.optional(s, pointer(prefix_path, i), f"{hint}-{i}")
            if slot is None:  # no element may stand at i, so the array ends before it
                prefix, rest = prefix[:i], False
                break
            slots.append(slot)
        rest_rule = None
        if rest is not False and (hi is None or hi > len(prefix)) and rest is not True:
            rest_rule = self.optional(rest, rest_path, f"{hint}-item")
            rest = False if rest_rule is None else rest
        if rest is False:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        if hi is not None and hi < lo:
            raise self.empty(path, "the array bounds admit no length")
        if max(lo, hi or 0) > MAX_REPEAT:
            self.refuse(pointer(path, "maxItems" if (hi or 0) > MAX_REPEAT else "minItems"))
            hi = None if (hi or 0) > MAX_REPEAT else hi
        if not prefix and rest is True and lo == 0 and hi is None:
            return self.r.primitive("array")
        ws = self.r.primitive("ws")
        if rest is True and (hi is None or hi > len(prefix)):
            rest_rule = self.r.primitive("value")

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
            return repeat(f'("," {ws} {rest_rule})', need, most)

        first = slots[0] if prefix else rest_rule
        if first is None or hi == 0:  # only the empty array
            return f'"[" {ws} "]"'
        after = tail(1)
        body = f"{first} {after}".strip()
        if lo == 0:
            return f'"[" {ws} ({body} {ws})? "]"'
        return f'"[" {ws} {body} {ws} "]"'

    def counted_object(self, extra, fewest: int, most: int | None, path: str, hint: str) -> str:
        """An object of additional properties only, at least `fewest` (0 or 1) and at most `most` of them."""
        if most is not None and most < fewest:
            raise self.empty(path, "maxProperties is below minProperties")
        ws = self.r.primitive("ws")
        value = None if extra is False else self.optional(extra, pointer(path, "additionalProperties"),
                                                          f"{hint}-additional")
        if value is None or most == 0:
            if fewest:
                raise self.empty(path, "no property is allowed, and minProperties asks for one")
            return f'"{{" {ws} "}}"'
        member = self.r.add(f"{hint}-member", f'{self.r.primitive("string")} {ws} ":" {ws} {value}')
        more = repeat(f'("," {ws} {member})', 0, None if most is None else most - 1)
        members = f"{member} {more}"
        return f'"{{" {ws} {members} {ws} "}}"' if fewest else f'"{{" {ws} ({members} {ws})? "}}"'

    def t_object(self, schema: dict, path: str, hint: str) -> str:
        props = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(props, dict):
            raise self.fail(pointer(path, "properties"), "properties must be an object")
        if not isinstance(required, list) or not all(isinstance(x, str) for x in required):
            raise self.fail(pointer(path, "required"), "required must be an array of strings")
        extra = schema.get("additionalProperties", True)
        if not isinstance(extra, (bool, dict)):
            raise self.fail(pointer(path, "additionalProperties"), "must be a boolean or a schema")
        fewest, most = self.count(schema, "minProperties", path, 0), self.count(schema, "maxProperties", path)
        if fewest or most is not None:
            if not props and not required and fewest <= 1:
                return self.counted_object(extra, fewest, most, path, hint)
            # Beside declared properties the count is not written here; at least two would have to be distinct
            # keys, which a grammar cannot tell from a key written twice.
            for key in ("minProperties", "maxProperties"):
                if key in schema:
                    self.refuse(pointer(path, key))
        if not props and extra is True and not required:
            return self.r.primitive("object")
        ws = self.r.primitive("ws")
        extra_value = None
        if extra is not False:  # additional properties no value satisfies are not allowed at all
            extra_value = self.optional(extra, pointer(path, "additionalProperties"), f"{hint}-additional")
            extra = extra if extra_value is not None else False
        names, kvs, req = [], {}, []
        forbidden = []  # properties no value satisfies: neither written nor allowed as additional ones
        for name, sub in props.items():
            where = pointer(pointer(path, "properties"), name)
            if name in required:
                value = self.rule(sub, where, f"{hint}-{name}")
            else:
                value = self.optional(sub, where, f"{hint}-{name}")
                if value is None:
                    forbidden.append(name)
                    continue
            kvs[name] = self.r.add(f"{hint}-{name}-kv", f'{string_literal(name)} {ws} ":" {ws} {value}')
            names.append(name)
            req.append(name in required)
        missing = [r for r in required if r not in props]
        if missing:
            if extra is False:
                raise self.empty(pointer(path, "required"),
                                f"required properties {missing} are not allowed (additionalProperties is false)")
            for r_name in missing:  # required but undeclared: an additional value, declared after the others
                kvs[r_name] = self.r.add(f"{hint}-{r_name}-kv",
                                         f'{string_literal(r_name)} {ws} ":" {ws} {extra_value}')
                names.append(r_name)
                req.append(True)
        extra_kv = None
        if extra is not False:
            key = self.r.add(f"{hint}-additional-key", string_except(names + forbidden, self.r)) \
                if names or forbidden else self.r.primitive("string")
            extra_kv = self.r.add(f"{hint}-additional-kv", f'{key} {ws} ":" {ws} {extra_value}')
        # rest[i]: properties i.. after at least one was written, each starting with a comma; first[i]: the
        # members when the first one written is at index >= i. Both are built from the end; every 8th suffix of
        # rest becomes a rule of its own, so that the grammar grows linearly with the properties (and objects of
        # up to 8 keep their members inline).
        extra_tail = f'("," {ws} {extra_kv})*' if extra_kv else ""
        rest = [""] * len(names) + [extra_tail]
        first: list[str | None] = [None] * len(names) + [f"{extra_kv} {extra_tail}" if extra_kv else None]
        for i in range(len(names) - 1, -1, -1):
            piece = f'"," {ws} {kvs[names[i]]}'
            piece = piece if req[i] else f"({piece})?"
            after = rest[i + 1]
            if (len(names) - i - 1) % 8 == 0 and i + 1 < len(names):
                after = self.r.add(f"{hint}-rest-{i + 1}", after)
            rest[i] = f"{piece} {after}".strip()
            here = f"{kvs[names[i]]} {after}".strip()
            later = first[i + 1]
            if req[i] or later is None:
                first[i] = here
            else:
                later_rule = self.r.add(f"{hint}-from-{i + 1}", later) if i + 1 < len(names) else f"({later})"
                first[i] = f"{here} | {later_rule}"

        body = first[0]
        if body is None:
            return f'"{{" {ws} "}}"'
        inner = self.r.add(f"{hint}-members", body) if "|" in body else body
        if any(req):
            return f'"{{" {ws} {inner} {ws} "}}"'
        return f'"{{" {ws} ({inner} {ws})? "}}"'


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


# ---------------------------------------------------------------------------------------------------- API
class SchemaRules:
    """Rules for several schemas in one grammar (tool calls): `add` each, then the caller writes its `root`."""

    def __init__(self) -> None:
        self._rules = Rules()
        self.unenforced: list[str] = []  # keywords best-effort schemas left out, by path

    def add(self, schema, name: str, *, strict: bool = True) -> str:
        """The name of a rule that matches exactly the documents of `schema` written as described above. With
        `strict` False (best effort) the keywords that would be refused are left out instead, the grammar then
        allowing more than the schema does, and listed in `unenforced`."""
        return self._add(schema, name, "" if name == "root" else name, strict)

    def _add(self, schema, name: str, prefix: str, strict: bool = True) -> str:
        if not re.fullmatch(r"[a-zA-Z0-9-]+", name or "") or (name in RESERVED and name != "root"):
            raise GrammarError(f"rule name {name!r}: use letters, digits and '-', and none of {sorted(RESERVED)}")
        if name in self._rules.rules:
            raise GrammarError(f"rule name {name!r} is already used in this grammar")
        snapshot = dict(self._rules.rules)
        self._rules.rules[name] = "\0pending " + name
        conv = _Converter(self._rules, schema, prefix=prefix)
        conv.strict = strict
        try:
            body = conv.visit(conv.doc, "", conv.hint(""))
            if conv.unsupported and strict:
                raise UnsupportedSchemaError(
                    "JSON schema keywords that constrain documents but are not supported: "
                    + ", ".join(conv.unsupported), list(conv.unsupported))
            self.unenforced += conv.unsupported
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
