"""One valid instance of a JSON Schema, built deterministically, for walking a grammar token by token.

Covers what schemas for structured output use (type, properties/required, items/prefixItems, enum/const,
anyOf/oneOf/allOf, $ref into $defs/definitions, bounds on strings, numbers and arrays, the common string formats).
A `pattern` is answered by the candidates in `_PATTERN_CANDIDATES` that match it; a schema none of this covers
raises InstanceError naming the keyword, rather than producing a document that may not be valid.
"""
from __future__ import annotations

import re
from typing import Any


class InstanceError(ValueError):
    pass


_FORMATS = {
    "date": "2024-05-17",
    "date-time": "2024-05-17T08:30:00Z",
    "time": "08:30:00Z",
    "email": "ada@example.com",
    "uuid": "123e4567-e89b-42d3-a456-426614174000",
    "uri": "https://example.com/a/b?c=1",
    "hostname": "example.com",
    "ipv4": "192.168.0.1",
    "ipv6": "2001:db8::1",
    "duration": "P3DT4H",
}
_PATTERN_CANDIDATES = ["ABC-1234", "abc", "A1", "abc123", "2024-05-17", "+1-555-0100", "x", "AB12", "12345",
                       "a_b", "hello-world", "#a1b2c3", "ABC", "1.2.3", "v1.2.3", "US", "aaa", "0"]
_ORDER = [False]  # required_first of the instance being built
_WORDS = ["alpha", "Ada Lovelace", "café ünïcode ☕", "line\nbreak \"quoted\"", "x"]


def instance(schema: Any, root: Any = None, depth: int = 0, salt: int = 0, required_first: bool = False) -> Any:
    """A value valid under `schema` (`root` resolves $ref). Object keys come in the order of `properties`, or with
    `required_first` the required ones first (the order llama.cpp's converter fixes), both valid JSON."""
    if depth == 0:
        _ORDER[0] = required_first
    root = schema if root is None else root
    if schema is True or schema == {}:
        return {"any": [1, "two", None]}
    if schema is False:
        raise InstanceError("schema `false` has no instance")
    if depth > 12:
        raise InstanceError("schema nests deeper than 12 levels (recursive $ref without a base case?)")
    if "$ref" in schema:
        return instance(_resolve(root, schema["$ref"]), root, depth + 1, salt)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][salt % len(schema["enum"])]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            rest = {k: v for k, v in schema.items() if k != key}
            branch = schema[key][salt % len(schema[key])]
            merged = _merge(rest, branch, root) if rest else branch
            return instance(merged, root, depth + 1, salt)
    if "allOf" in schema:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            merged = _merge(merged, part, root)
        return instance(merged, root, depth + 1, salt)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = [k for k in kind if k != "null"][0] if len(kind) > 1 else kind[0]
    if kind is None:
        kind = ("object" if "properties" in schema or "additionalProperties" in schema else
                "array" if "items" in schema or "prefixItems" in schema else
                "string" if any(k in schema for k in ("pattern", "format", "minLength", "maxLength")) else
                "number" if any(k in schema for k in ("minimum", "maximum")) else "object")
    if kind == "object":
        return _object(schema, root, depth, salt)
    if kind == "array":
        return _array(schema, root, depth, salt)
    if kind == "string":
        return _string(schema, salt)
    if kind in ("integer", "number"):
        return _number(schema, kind, salt)
    if kind == "boolean":
        return salt % 2 == 0
    if kind == "null":
        return None
    raise InstanceError(f"type {kind!r} not covered")


def _resolve(root: Any, ref: str) -> Any:
    if not ref.startswith("#"):
        raise InstanceError(f"$ref {ref!r}: only local references are covered")
    node = root
    for part in ref[1:].split("/")[1:]:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _merge(a: dict, b: Any, root: Any) -> dict:
    if "$ref" in b:
        b = _resolve(root, b["$ref"])
    out = dict(a)
    for k, v in b.items():
        if k == "properties":
            out["properties"] = {**a.get("properties", {}), **v}
        elif k == "required":
            out["required"] = list(dict.fromkeys(a.get("required", []) + v))
        else:
            out[k] = v
    return out


def _object(schema: dict, root: Any, depth: int, salt: int) -> dict:
    props = schema.get("properties", {})
    required = schema.get("required", [])
    out = {}
    items = list(props.items())
    if _ORDER[0]:
        items.sort(key=lambda kv: kv[0] not in required)
    for i, (name, sub) in enumerate(items):
        # Every property, so the walk goes through optional ones too (required ones first is not needed: JSON
        # Schema objects have no order, and converters keep the properties' order).
        out[name] = instance(sub, root, depth + 1, salt + i)
    for name in required:
        if name not in out:
            extra = schema.get("additionalProperties", True)
            out[name] = instance(extra if isinstance(extra, dict) else True, root, depth + 1, salt)
    n_min = schema.get("minProperties", 0)
    extra = schema.get("additionalProperties", True)
    if not props and extra is True:
        out = {"note": "free-form", "values": [1, 2.5, True, None], "nested": {"k": "v"}}
    k = 0
    while len(out) < n_min:
        if extra is False:
            raise InstanceError("minProperties above the declared properties with additionalProperties false")
        out[f"extra{k}"] = instance(extra if isinstance(extra, dict) else {"type": "string"}, root, depth + 1, k)
        k += 1
    return out


def _array(schema: dict, root: Any, depth: int, salt: int) -> list:
    prefix = schema.get("prefixItems", [])
    items = schema.get("items", True if not prefix else False)
    lo = schema.get("minItems", 0)
    hi = schema.get("maxItems", max(lo, len(prefix), 3))
    n = max(lo, min(hi, max(len(prefix), 2 if items is not False else len(prefix))))
    out = [instance(prefix[i], root, depth + 1, salt + i) for i in range(min(n, len(prefix)))]
    while len(out) < n:
        out.append(instance(items if isinstance(items, dict) else {"type": "integer"}, root, depth + 1,
                            salt + len(out)))
    if schema.get("uniqueItems") and len({repr(v) for v in out}) < len(out):
        raise InstanceError("uniqueItems with items this generator repeats")
    return out


def _string(schema: dict, salt: int) -> str:
    if "pattern" in schema:
        for cand in _PATTERN_CANDIDATES:
            if re.search(schema["pattern"], cand) and _length_ok(schema, cand):
                return cand
        raise InstanceError(f"pattern {schema['pattern']!r}: no candidate string matches it")
    fmt = schema.get("format")
    if fmt in _FORMATS:
        return _FORMATS[fmt]
    text = _WORDS[salt % len(_WORDS)]
    lo, hi = schema.get("minLength", 0), schema.get("maxLength", 10_000)
    while len(text) < lo:
        text += "abcdefgh"
    return text[:max(lo, min(hi, len(text)))]


def _length_ok(schema: dict, s: str) -> bool:
    return schema.get("minLength", 0) <= len(s) <= schema.get("maxLength", 10_000)


def _number(schema: dict, kind: str, salt: int) -> int | float:
    lo = schema.get("minimum", schema.get("exclusiveMinimum"))
    hi = schema.get("maximum", schema.get("exclusiveMaximum"))
    value: float = [42, -7, 3.25, 1815, 0][salt % 5]
    if kind == "integer":
        value = int(value)
    if lo is not None and value < lo or "exclusiveMinimum" in schema and value <= lo:
        value = int(lo) + 1 if kind == "integer" else lo + 0.5
    if hi is not None and value > hi or "exclusiveMaximum" in schema and value >= hi:
        value = int(hi) - (1 if "exclusiveMaximum" in schema else 0) if kind == "integer" else hi - 0.5
    if "multipleOf" in schema:
        m = schema["multipleOf"]
        value = m * max(1, round(value / m))
    return value
