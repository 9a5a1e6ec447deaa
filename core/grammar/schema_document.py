"""A JSON Schema document as the GBNF converter (json_schema.py) reads it, apart from any grammar: its keywords
(which constrain documents, which are annotations), JSON pointers, `$ref`s inside the document (by pointer, `$id`
and `$anchor`), `allOf` merged into one schema, whether the options of a `oneOf` are disjoint (then it is an
`anyOf`), and the complement of a schema where one can be written (`not`, `if`/`then`/`else`)."""
from __future__ import annotations

import json
import re
import urllib.parse

from ..errors import GrammarError, NoDocumentError, UnsupportedSchemaError

ANNOTATIONS = {
    "title", "description", "examples", "default", "$schema", "$id", "id", "$comment", "deprecated", "readOnly",
    "writeOnly", "discriminator", "$anchor", "$dynamicAnchor", "$vocabulary", "contentMediaType",
    "contentEncoding", "example", "externalDocs", "xml",
}
CONTAINERS = {"$defs", "definitions"}
# Subschemas inside subschemas (and $ref chains): deeper is refused, well before Python's recursion limit.
MAX_DEPTH = 64
# Keywords that constrain documents and that this converter does not enforce.
UNSUPPORTED = {
    "multipleOf", "contains", "minContains", "maxContains", "patternProperties", "propertyNames",
    "dependentRequired", "dependentSchemas", "dependencies",
    "unevaluatedItems", "$dynamicRef", "$recursiveRef", "contentSchema",
}
NO_OP_VALUES = {"uniqueItems": False, "unevaluatedProperties": True, "additionalItems": True}
TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
TYPE_KEYWORDS = {
    "object": {"properties", "required", "additionalProperties", "minProperties", "maxProperties"},
    "array": {"items", "prefixItems", "minItems", "maxItems", "additionalItems", "uniqueItems"},
    "string": {"minLength", "maxLength", "pattern", "format"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
}


def pointer(path: str, key) -> str:
    return f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"


def type_of(value) -> str:
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


def types_match(value, types: set[str]) -> bool:
    t = type_of(value)
    return t in types or (t == "integer" and "number" in types)


# Keywords whose values are data, not subschemas: an "$id" or "$ref" inside them is a value like any other.
_DATA = {"enum", "const", "default", "examples", "example", "$comment", "title", "description"}
BASE = "https://schema.invalid/root.json"  # the base URI of a schema without an $id of its own


def _join(base: str, ref: str) -> str:
    """`ref` resolved against `base` (RFC 3986; a URN base takes fragments only)."""
    if ref.startswith("#"):
        return urllib.parse.urldefrag(base)[0] + ref
    return urllib.parse.urljoin(base, ref)


def _token(key) -> str:
    return str(key).replace("~", "~0").replace("/", "~1").replace("%", "%25")


def with_local_refs(document):
    """A copy of `document` whose every $ref that names a schema inside it (by a URI relative to the `$id`s around
    it, an `$anchor` or a `$dynamicAnchor`, which is one too, or a pointer into the resource it is in) is rewritten
    as the JSON pointer '#/...' from the root; refs to documents elsewhere are left as they are (and refused)."""
    resources: dict[str, object] = {}
    anchors: dict[str, object] = {}
    where: dict[int, str] = {}  # id(node) -> its JSON pointer from the root
    refs: list[tuple[dict, str]] = []  # (copied node holding a $ref, the URI it names)
    if not isinstance(document, dict):
        return document
    # A worklist, not recursion: documents may nest deeper than Python's stack (the converter refuses them later,
    # at their path).
    top: list = [None]
    pending: list = [(document, top, 0, "", BASE)]
    while pending:
        node, parent, key, pointer, base = pending.pop()
        if isinstance(node, list):
            parent[key] = out = [None] * len(node)
            pending += [(v, out, i, f"{pointer}/{i}", base) for i, v in enumerate(node)]
            continue
        if not isinstance(node, dict):
            parent[key] = node
            continue
        if isinstance(node.get("$id"), str):
            base = urllib.parse.urldefrag(_join(base, node["$id"]))[0]
            resources.setdefault(base, node)
        for name in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(name), str):
                anchors.setdefault(f"{base}#{node[name]}", node)
        where[id(node)] = pointer
        parent[key] = out = {}
        for k, v in node.items():
            out[k] = v
            if k not in _DATA and isinstance(v, (dict, list)):
                pending.append((v, out, k, f"{pointer}/{_token(k)}", base))
        if isinstance(node.get("$ref"), str):  # "#/..." too: it points into the resource the node is in
            refs.append((out, _join(base, node["$ref"])))
    root = top[0]
    resources.setdefault(BASE, document)
    for node, uri in refs:
        resource, fragment = urllib.parse.urldefrag(uri)
        target = anchors.get(uri) if fragment and not fragment.startswith("/") else resources.get(resource)
        if target is None:
            continue
        pointer = where.get(id(target))
        if pointer is None:
            continue
        if fragment.startswith("/"):
            pointer += fragment  # a pointer inside the resource, escaped as the $ref wrote it
        node["$ref"] = "#" + pointer
    return root


UNTYPED = ("null", "boolean", "object", "array", "string", "number")  # what a schema without "type" allows
# A key no JSON document can hold (not a string): numbers of the schema it marks have a nonzero fraction, the
# complement of the integers among them.
FRACTIONAL = ("fractional",)
_FLIPPED_BOUNDS = {"minimum": "exclusiveMaximum", "exclusiveMaximum": "minimum", "maximum": "exclusiveMinimum",
                   "exclusiveMinimum": "maximum"}


def _flipped(key: str, value) -> list[dict] | None:
    """The schemas (of the keyword's type) of the values that one keyword rejects, or None."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if key in _FLIPPED_BOUNDS and number:
        return [{_FLIPPED_BOUNDS[key]: value}]
    if key in ("minLength", "minItems") and isinstance(value, int) and not isinstance(value, bool):
        return [{key.replace("min", "max"): value - 1}] if value > 0 else []
    if key in ("maxLength", "maxItems") and isinstance(value, int) and not isinstance(value, bool):
        return [{key.replace("max", "min"): value + 1}]
    if key == "required" and isinstance(value, list) and all(isinstance(n, str) for n in value):
        return [{"properties": {n: False}} for n in dict.fromkeys(value)]
    return None


class SchemaDocument:
    """One schema document being converted: what it refers to, and the constraining keywords refused so far."""

    def __init__(self, document) -> None:
        self.doc = with_local_refs(document)
        self.unsupported: list[str] = []
        self.inlining: list[str] = []  # $refs being merged into an allOf, to refuse an endless merge
        self.strict = True  # False: best effort, what would be refused is left out (and listed in `unsupported`)
        self.negating: list[str] = []  # the $refs whose targets negation is looking into

    def fail(self, path: str, message: str, kind: type[GrammarError] = GrammarError) -> GrammarError:
        return kind(f"JSON schema at / (root): {message}" if not path else f"JSON schema at {path}: {message}")

    def empty(self, path: str, message: str) -> NoDocumentError:
        """The error for a (sub)schema that no document satisfies: where a document may do without it (an
        alternative, an optional property, an array position) it is left out instead."""
        return self.fail(path, message, NoDocumentError)

    def refuse(self, path: str) -> None:
        if path not in self.unsupported:
            self.unsupported.append(path)

    # ------------------------------------------------------------------------------------------------ refs
    def resolve(self, ref, path: str, relax: bool = True):
        """The schema `ref` points to. One in another document is refused, or, in best effort (and `relax`), taken
        as `true` and listed as not enforced."""
        if not isinstance(ref, str):
            raise self.fail(path, "$ref must be a string")
        if ref != "#" and not ref.startswith("#/") and not self.strict and relax:
            self.refuse(path)
            return True
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

    # ------------------------------------------------------------------------------------------------ allOf
    def merge(self, parts: list, path: str) -> dict:
        """One schema equivalent to all of `parts` (refs resolved one level), or refuse what cannot merge."""
        flat: list[dict] = []

        def add(part, where: str, depth: int = 0) -> None:
            if depth > MAX_DEPTH:
                raise self.fail(where, f"allOf and $ref nest more than {MAX_DEPTH} deep")
            if part is True:
                return
            if part is False:
                raise self.empty(where, "allOf contains `false`: no document can match")
            if not isinstance(part, dict):
                raise self.fail(where, "a schema must be an object or a boolean")
            part = dict(part)
            if "if" not in part or ("then" not in part and "else" not in part):
                for key in ("if", "then", "else"):  # alone, each constrains nothing: never merge them with others
                    part.pop(key, None)
            if "$ref" in part:
                ref = part.pop("$ref")
                if ref in self.inlining:
                    self.refuse(pointer(where, "$ref"))  # a recursive schema inside allOf cannot be flattened
                    return
                self.inlining.append(ref)
                try:
                    add(self.resolve(ref, pointer(where, "$ref")), ref[1:], depth + 1)
                finally:
                    self.inlining.pop()
            if "allOf" in part:
                for i, p in enumerate(part.pop("allOf")):
                    add(p, pointer(pointer(where, "allOf"), i), depth + 1)
            flat.append(part)

        for i, p in enumerate(parts):
            add(p, path)
        out: dict = {}
        objects = [p for p in flat if TYPE_KEYWORDS["object"] & set(p)]
        for p in flat:
            for k, v in p.items():
                if k in ANNOTATIONS or k in CONTAINERS or k in ("properties", "additionalProperties") or k in _ITEMS:
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
                        raise self.empty(path, "allOf parts have no type in common")
                    out[k] = sorted(both) if len(both) > 1 else next(iter(both))
                elif k == "required":
                    out[k] = list(dict.fromkeys(list(out[k]) + list(v)))
                elif k == "enum":
                    out[k] = [x for x in out[k] if x in v]
                elif k in ("minimum", "minLength", "minItems", "minProperties"):
                    out[k] = max(out[k], v)
                elif k in ("maximum", "maxLength", "maxItems", "maxProperties"):
                    out[k] = min(out[k], v)
                elif k in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(v, bool) \
                        and not isinstance(out[k], bool):
                    out[k] = max(out[k], v) if k == "exclusiveMinimum" else min(out[k], v)
                else:
                    self.refuse(pointer(path, k))
        out.update(_merged_items([p for p in flat if _ITEMS & set(p)]))
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
        if "$ref" in schema and set(schema) - ANNOTATIONS - CONTAINERS == {"$ref"}:
            try:
                return self.summary(self.resolve(schema["$ref"], ""), depth + 1)
            except GrammarError:
                return None, {}
        types = None
        if "type" in schema:
            t = schema["type"]
            types = {t} if isinstance(t, str) else set(t)
        if "const" in schema:
            types = {type_of(schema["const"])}
        elif isinstance(schema.get("enum"), list):
            types = {type_of(v) for v in schema["enum"]}
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

    # ------------------------------------------------------------------------------------------------ not
    def negation(self, schema):
        """A schema for exactly the documents `schema` rejects, or None where none is written here: booleans, a
        double `not`, types, and one bound or const of a type beside them."""
        if isinstance(schema, bool):
            return not schema
        if not isinstance(schema, dict):
            return None
        keys = {k for k in schema if k not in ANNOTATIONS and k not in CONTAINERS}
        if not keys:
            return False
        if keys == {"not"}:
            return schema["not"]
        if keys == {"$ref"} and isinstance(schema["$ref"], str) and schema["$ref"] not in self.negating:
            self.negating.append(schema["$ref"])  # a $ref loop has no complement written here
            try:
                return self.negation(self.resolve(schema["$ref"], "", relax=False))
            except GrammarError:
                return None
            finally:
                self.negating.pop()
        t = schema.get("type")
        types = set(UNTYPED) if t is None else {t} if isinstance(t, str) else set(t) if isinstance(t, list) else None
        if types is None or not types <= set(TYPES):
            return None
        rest = keys - {"type"}
        if "integer" in types and "number" not in types:
            if rest:
                return None
            types = (types - {"integer"}) | {"number"}
            others = [{"type": x} for x in UNTYPED if x not in types] + [{"type": "number", FRACTIONAL: True}]
            return {"anyOf": others}
        others = [{"type": x} for x in UNTYPED if x not in types]
        if not rest:
            return {"anyOf": others} if others else False
        if len(rest) != 1:
            return None
        (key,) = rest
        flipped = _flipped(key, schema[key])
        owner = next((ty for ty, words in TYPE_KEYWORDS.items() if key in words), None)
        if flipped is None or owner is None or owner not in types:
            return None
        options = others + [{"type": owner, **f} for f in flipped]
        return {"anyOf": options} if options else False


_ITEMS = {"items", "prefixItems", "additionalItems"}


def _merged_items(parts: list[dict]) -> dict:
    """The element schemas of arrays that match all of `parts`: element i must match what each part says of its
    element i (its prefixItems[i], else its items), so the parts' tuples are merged position by position; a part's
    `items` never applies to another part's tuple."""
    if len(parts) <= 1:
        return {k: v for p in parts for k, v in p.items() if k in _ITEMS}
    tuples, rests = [], []
    for p in parts:
        if isinstance(p.get("items"), list):  # drafts 4-7: a tuple in items, the rest in additionalItems
            tuples.append(p["items"])
            rests.append(p.get("additionalItems", True))
        else:
            tuples.append(p.get("prefixItems", []))
            rests.append(p.get("items", True))

    def all_of(schemas: list):
        if any(s is False for s in schemas):
            return False
        schemas = [s for s in schemas if s is not True]
        return True if not schemas else schemas[0] if len(schemas) == 1 else {"allOf": schemas}
    longest = max(len(t) for t in tuples)
    prefix = [all_of([t[i] if i < len(t) else r for t, r in zip(tuples, rests)]) for i in range(longest)]
    return {"prefixItems": prefix, "items": all_of(rests)} if prefix else {"items": all_of(rests)}


def _types_overlap(a: set, b: set) -> bool:
    widen = lambda s: s | ({"integer"} if "number" in s else set())  # noqa: E731
    return bool(widen(a) & widen(b))

