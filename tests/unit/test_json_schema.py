"""JSON Schema -> GBNF: documents of the corpus are accepted byte by byte, invalid ones are rejected, and
keywords that are not enforced are refused by path."""
from __future__ import annotations

import copy
import json
import random

import jsonschema
import pytest

from llmchat.errors import GrammarError, UnsupportedSchemaError
from llmchat.grammar import Grammar
from llmchat.grammar.json_schema import JSON_GBNF, SchemaRules, json_object_gbnf, schema_to_gbnf

from schema_corpus import generate, load_schemas, serializations

CORPUS = load_schemas()


def accepts(grammar: Grammar, text: str) -> bool:
    m = grammar.matcher()
    return m.advance(text.encode("utf-8")) and m.can_end


def validator(schema):
    return jsonschema.validators.validator_for(schema)(schema)


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 20


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_valid_documents_accepted(name):
    schema = CORPUS[name]
    grammar = Grammar.parse(schema_to_gbnf(schema))
    check, rng = validator(schema), random.Random(name)
    for _ in range(25):
        doc = generate(schema, rng)
        assert check.is_valid(doc), (doc, next(check.iter_errors(doc)).message)
        for text in serializations(doc):
            assert accepts(grammar, text), text


def _mutations(doc, rng: random.Random):
    """Copies of doc with one random change somewhere inside."""
    paths = []

    def walk(node, path):
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + [i])
    walk(doc, [])
    for _ in range(12):
        path = rng.choice(paths)
        new = copy.deepcopy(doc)
        parent, node = None, new
        for p in path:
            parent, node = node, node[p]
        choice = rng.randrange(6)
        if choice == 0 and parent is not None:
            parent[path[-1]] = rng.choice([None, True, 7, -3.5, "str", [], {}, 10 ** 9])
        elif choice == 1 and isinstance(node, dict) and node:
            del node[rng.choice(list(node))]
        elif choice == 2 and isinstance(node, dict):
            node["zz_extra"] = 1
        elif choice == 3 and isinstance(node, list) and node:
            node.extend(copy.deepcopy(node) * 3)
        elif choice == 4 and isinstance(node, (int, float)) and not isinstance(node, bool) and parent is not None:
            parent[path[-1]] = node + rng.choice([-1000, -1, 1, 1000, 10 ** 6])
        elif choice == 5 and isinstance(node, str) and parent is not None:
            parent[path[-1]] = node + rng.choice(["x", "#", "0", "-"]) if rng.random() < 0.5 else ""
        else:
            continue
        yield new


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_invalid_documents_rejected(name):
    """Whatever a random mutation breaks, the grammar never accepts a document the schema rejects."""
    schema = CORPUS[name]
    grammar = Grammar.parse(schema_to_gbnf(schema))
    check, rng = validator(schema), random.Random("bad" + name)
    rejected = 0
    for _ in range(15):
        for bad in _mutations(generate(schema, rng), rng):
            if check.is_valid(bad):
                continue
            for text in serializations(bad)[:2]:
                assert not accepts(grammar, text), text
            rejected += 1
    assert rejected >= 5


PERSON = CORPUS["person"]


@pytest.mark.parametrize("doc", [
    {"name": 5, "age": 3},                                   # wrong type
    {"age": 3},                                              # missing required
    {"name": "a", "age": 151},                               # above maximum
    {"name": "a", "age": -1},                                # below minimum
    {"name": "", "age": 3},                                  # below minLength
    {"name": "a", "age": 3.5},                               # not an integer
])
def test_person_rejections(doc):
    assert not validator(PERSON).is_valid(doc)
    assert not accepts(Grammar.parse(schema_to_gbnf(PERSON)), json.dumps(doc))


def test_specific_rejections():
    book = Grammar.parse(schema_to_gbnf(CORPUS["address_book"]))
    assert accepts(book, '{"contacts": []}')
    assert not accepts(book, '{"contacts": [], "extra": 1}')              # additionalProperties false
    assert not accepts(book, '{"contacts": [{"first": "a", "phones": [{"kind": "fax", "number": "123456"}]}]}')
    assert not accepts(book, '{"contacts": [' + ",".join(['{"first": "a"}'] * 6) + "]}")  # maxItems 5
    ints = Grammar.parse(schema_to_gbnf({"type": "integer", "minimum": -40, "maximum": 55}))
    for v in range(-60, 80):
        assert accepts(ints, str(v)) == (-40 <= v <= 55), v
    assert not accepts(ints, "-0") and not accepts(ints, "007")
    nums = Grammar.parse(schema_to_gbnf({"type": "number", "exclusiveMinimum": 0, "maximum": 2}))
    for text, ok in [("0", False), ("0.0", False), ("0.001", True), ("2", True), ("2.0", True), ("2.01", False),
                     ("1.999", True), ("-0.5", False), ("3", False)]:
        assert accepts(nums, text) == ok, text


def test_integer_ranges_exhaustive():
    rng = random.Random(3)
    for _ in range(40):
        lo = rng.randint(-3000, 3000)
        hi = lo + rng.randint(0, 4000)
        g = Grammar.parse(schema_to_gbnf({"type": "integer", "minimum": lo, "maximum": hi}))
        for v in list(range(lo - 15, lo + 15)) + list(range(hi - 15, hi + 15)) + [rng.randint(lo, hi)]:
            assert accepts(g, str(v)) == (lo <= v <= hi), (lo, hi, v)
    only_min = Grammar.parse(schema_to_gbnf({"type": "integer", "minimum": 37}))
    for v in range(-50, 2000, 7):
        assert accepts(only_min, str(v)) == (v >= 37), v
    only_max = Grammar.parse(schema_to_gbnf({"type": "integer", "exclusiveMaximum": -9}))
    for v in range(-2000, 50, 7):
        assert accepts(only_max, str(v)) == (v < -9), v


BOUNDS = [-1000, -10, -9, -1, 0, 1, 7, 9, 10, 99, 100, 1234, -7.5, -0.5, 0.5, 7.5, 99.9, 1e3]


@pytest.mark.parametrize("kind", ["integer", "number"])
@pytest.mark.parametrize("keyword", ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"])
def test_every_integer_bound_at_its_edges(kind, keyword):
    """Each bound keyword, inclusive and exclusive, whole and fractional (`maximum: 7.5` on an integer), against
    jsonschema at the values where an off-by-one would show: the bound, one either side, and (numbers) the
    nearest decimals."""
    for bound in BOUNDS:
        schema = {"type": kind, keyword: bound}
        grammar, check = Grammar.parse(schema_to_gbnf(schema)), validator(schema)
        edge = int(bound // 1)
        values = [edge + d for d in range(-2, 3)]
        if kind == "number":
            values += [bound, bound - 0.1, bound + 0.1, bound - 0.01, bound + 0.01]
        for value in values:
            text = json.dumps(value)
            assert accepts(grammar, text) == check.is_valid(value), (schema, text)


@pytest.mark.parametrize("low,high", [("minimum", "maximum"), ("exclusiveMinimum", "maximum"),
                                      ("minimum", "exclusiveMaximum"), ("exclusiveMinimum", "exclusiveMaximum")])
def test_integer_ranges_at_both_edges(low, high):
    for lo, hi in [(-10, 10), (0, 1), (9, 10), (-1, 0), (7, 7), (-7.5, 7.5), (0.5, 1.5), (99, 1000)]:
        schema = {"type": "integer", low: lo, high: hi}
        check = validator(schema)
        if not any(check.is_valid(v) for v in range(int(lo) - 1, int(hi) + 2)):
            continue  # no integer in the range: a NoDocumentError, tested with the other refusals
        grammar = Grammar.parse(schema_to_gbnf(schema))
        for value in range(int(lo // 1) - 2, int(hi // 1) + 3):
            assert accepts(grammar, str(value)) == check.is_valid(value), (schema, value)


def test_whitespace_is_bounded():
    g = Grammar.parse(json_object_gbnf())
    assert accepts(g, '{\n' + " " * 40 + '"a": 1}')
    assert not accepts(g, '{\n' + " " * 41 + '"a": 1}')
    assert not accepts(g, '{  "a": 1}')
    assert not accepts(g, ' {"a": 1}')


def test_any_json_and_any_object():
    value, obj = Grammar.parse(JSON_GBNF), Grammar.parse(json_object_gbnf())
    gen = random.Random(5)
    from schema_corpus import DocGenerator
    for _ in range(200):
        doc = DocGenerator({}, gen).any_value(0)
        for text in serializations(doc):
            assert accepts(value, text), text
            assert accepts(obj, text) == isinstance(doc, dict), text
    for bad in ['{"a" 1}', "[1,]", '"\x01"', "01", "nul", '{"a":1,}', '"\\ud800"', "1.", '"\\x"']:
        assert not accepts(value, bad), bad


def test_strings_escapes_and_lengths():
    g = Grammar.parse(schema_to_gbnf({"type": "string", "minLength": 2, "maxLength": 3}))
    for s in ["ab", "abc", "é😀", "\n\"", "\x7f\x00"]:
        for ensure_ascii in (True, False):
            assert accepts(g, json.dumps(s, ensure_ascii=ensure_ascii).replace("\x7f", "\\u007f")), s
    for s in ["a", "abcd", "😀"]:
        assert not accepts(g, json.dumps(s)), s


UNSUPPORTED = [
    ({"type": "object", "properties": {"age": {"type": "integer", "multipleOf": 5}}}, ["/properties/age/multipleOf"]),
    ({"type": "array", "uniqueItems": True, "contains": {"type": "string"}}, ["/uniqueItems", "/contains"]),
    ({"type": "object", "patternProperties": {"^x": {}}, "minProperties": 2, "propertyNames": {"maxLength": 3}},
     ["/patternProperties", "/minProperties", "/propertyNames"]),
    ({"if": {"properties": {"a": {"const": 1}}}, "then": {"maxLength": 3}, "else": {"type": "integer"}}, ["/if"]),
    ({"not": {"type": "object", "properties": {"a": {"type": "string"}}}}, ["/not"]),
    ({"type": "string", "format": "email"}, ["/format"]),
    ({"$defs": {"a": {"type": "number", "multipleOf": 0.5}}, "properties": {"x": {"$ref": "#/$defs/a"}}},
     ["/$defs/a/multipleOf"]),
    ({"type": "string", "pattern": "^a+$", "maxLength": 4}, ["/pattern", "/maxLength"]),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, ["/oneOf"]),
    ({"type": "array", "contains": {"const": 1}, "maxContains": 2}, ["/contains", "/maxContains"]),
    ({"type": "object", "unevaluatedProperties": False, "dependentRequired": {"a": ["b"]}},
     ["/unevaluatedProperties", "/dependentRequired"]),
]


@pytest.mark.parametrize("schema,paths", UNSUPPORTED)
def test_unsupported_keywords_named(schema, paths):
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_gbnf(schema)
    assert sorted(info.value.keywords) == sorted(paths)
    for p in paths:
        assert p in str(info.value)


def test_annotations_ignored():
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x", "title": "t",
              "description": "d", "examples": [1], "default": 1, "$comment": "c", "deprecated": True,
              "readOnly": True, "writeOnly": False, "type": "integer"}
    assert accepts(Grammar.parse(schema_to_gbnf(schema)), "12")


@pytest.mark.parametrize("schema,fragment", [
    (5, "must be an object or a boolean"),
    ({"$ref": "#/$defs/missing"}, "points to nothing"),
    ({"$ref": "https://example.com/schema.json"}, "not a reference inside this schema"),
    (False, "accepts no document"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "admit no value"),
    ({"type": "strin"}, "type must be one of"),
    ({"type": "string", "pattern": "(a)\\1"}, "backreference"),
    ({"type": "string", "pattern": "a(?=b)"}, "lookahead"),
])
def test_bad_schemas(schema, fragment):
    with pytest.raises(GrammarError) as info:
        schema_to_gbnf(schema)
    assert fragment in str(info.value)


def test_schema_rules_several_schemas_in_one_grammar():
    rules = SchemaRules()
    a = rules.add(CORPUS["person"], "person")
    b = rules.add(CORPUS["recipe"], "recipe")
    assert (a, b) == ("person", "recipe")
    g = Grammar.parse(rules.gbnf() + f"root ::= {a} | {b}\n")
    rng = random.Random(9)
    for name in ("person", "recipe"):
        for _ in range(5):
            assert accepts(g, json.dumps(generate(CORPUS[name], rng)))
    with pytest.raises(GrammarError):
        rules.add(True, "person")
    with pytest.raises(UnsupportedSchemaError):
        rules.add({"multipleOf": 2}, "other")
    Grammar.parse(rules.gbnf() + f"root ::= {a}\n")  # a failed add leaves the rules usable


def test_number_ranges_against_comparison():
    rng = random.Random(11)
    for _ in range(30):
        lo, hi = sorted(rng.sample(range(-30, 30), 2))
        lo_x, hi_x = rng.random() < 0.5, rng.random() < 0.5
        schema = {"type": "number", ("exclusiveMinimum" if lo_x else "minimum"): lo,
                  ("exclusiveMaximum" if hi_x else "maximum"): hi}
        if rng.random() < 0.2:
            del schema["exclusiveMinimum" if lo_x else "minimum"]
        g = Grammar.parse(schema_to_gbnf(schema))
        check = validator(schema)
        for _ in range(60):
            v = rng.choice([rng.randint(lo - 3, hi + 3), round(rng.uniform(lo - 3, hi + 3), rng.randint(1, 4))])
            for text in {json.dumps(v), f"{v}.0" if isinstance(v, int) else json.dumps(v)}:
                assert accepts(g, text) == check.is_valid(json.loads(text)), (schema, text)


# Cases the JSON-Schema-Test-Suite does not list (tests/unit/test_json_schema_suite.py runs the suite): each document
# as raw JSON text, the grammar's answer against jsonschema's (formats asserted).
SPELLED = {"type": "object", "properties": {"foo": {"type": "integer"}, 'a"b': {"type": "integer"},
                                            "é": {"type": "integer"}, "x\ny": {"type": "integer"},
                                            "gone": False},
           "additionalProperties": {"type": "string"}}
HIDDEN = [
    (SPELLED, ['{"foo": 1}', '{"\\u0066oo": "x"}', '{"\\u0066OO": "x"}', '{"fo": "x"}', '{"\\u0066o": "x"}',
               '{"a\\"b": "x"}', '{"a\\u0022b": "x"}', '{"\\u00e9": "x"}', '{"\\u00E9": "x"}', '{"é": 1}',
               '{"x\\ny": "x"}', '{"x\\u000ay": "x"}', '{"gone": "x"}', '{"\\u0067one": "x"}', '{"gonE": "x"}',
               '{"foo": 1, "\\u0066oo": "x"}', '{"\\ud83d\\ude00": "x"}']),
    ({"minimum": 3}, ['"x"', "[1]", "5", "2", "null", "{}", "2.5", "3.0"]),
    ({"required": ["a"], "maxLength": 1}, ["[]", '"x"', '"xy"', "{}", '{"a": 1}', "7"]),
    ({"allOf": [{"items": {"type": "integer"}}, {"prefixItems": [{"type": "string"}]}]}, ["[]", '["a"]', "[1]"]),
    ({"allOf": [{"prefixItems": [{"type": "integer"}]}, {"items": {"minimum": 0}}]},
     ["[1, 2]", "[-1]", "[1, -2]", '["a"]', '[1, "a"]', "[]"]),
    ({"anyOf": [{"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"a": {"minimum": 2}}}]},
                {"type": "string"}]}, ['{"a": 1}', '{"a": 2}', '"s"', '{"a": "x"}', "[]"]),
    ({"type": "string", "pattern": "^é+$"}, ['"éé"', '"\\u00e9\\u00E9"', '"e"', '"\\u0065"']),
    ({"type": "string", "pattern": "^\\s$"}, ['"\\u00a0"', '"\\u2029"', '" "', '"x"', '"\\u200b"']),
    ({"type": "string", "pattern": "^🐲$"}, ['"🐲"', '"\\ud83d\\udc32"', '"\\uD83D\\uDC32"', '"\\ud83d\\udc33"']),
    ({"type": "integer"}, ["1", "1.0", "-7.00", "1.5", '"1"']),
    ({"const": 1}, ["1", "1.0", "true", "1.5"]),
    ({"enum": [0.5, 2.0, {"k": [1]}]}, ["0.5", "2", "2.0", '{"k": [1.0]}', '{"k": [1]}', "0.25"]),
    ({"minimum": 1.1, "exclusiveMaximum": 2.25}, ["1.1", "1.10", "1.09", "2.25", "2.249", "1.5", "2", '"x"']),
    ({"type": "number", "exclusiveMinimum": -0.5, "maximum": 0.125}, ["-0.5", "-0.4999", "0", "0.125", "0.1251"]),
    ({"maxProperties": 1}, ["{}", '{"a": 1}', '{"a": 1, "b": 2}', "[]", '"x"']),
    ({"type": "object", "minProperties": 1, "additionalProperties": {"type": "integer"}},
     ["{}", '{"a": 1}', '{"a": "x"}', '{"a": 1, "b": 2}']),
    ({"not": {"type": "null"}}, ["null", "1", '"x"', "{}"]),
    ({"not": {"type": "integer"}}, ["1", "1.5", "1.0", '"x"', "-0.25", "[]"]),
    ({"not": {"required": ["a"]}}, ["{}", '{"a": 1}', '{"b": 2}', "[]"]),
    ({"not": {"not": {"minLength": 2}}}, ['"a"', '"ab"', "1"]),
    ({"properties": {"a": {"not": {}}}}, ["{}", '{"a": 1}', '{"b": 1}']),
    ({"if": {"type": "string"}, "then": {"maxLength": 3}, "else": {"type": "integer"}},
     ['"abc"', '"abcd"', "5", "5.5", "null"]),
    ({"if": {"exclusiveMaximum": 0}, "then": {"minimum": -10}}, ["-5", "-11", "3", '"x"', "0"]),
    ({"if": {"maxItems": 1}, "else": {"items": {"type": "integer"}}}, ["[]", '["a"]', '["a", "b"]', "[1, 2]"]),
    ({"type": "string", "format": "date"}, ['"2024-02-29"', '"2023-02-29"', '"1900-02-29"', '"2000-02-29"',
                                            '"2023-04-31"', '"2023-12-31"']),
]


@pytest.mark.parametrize("schema, documents", HIDDEN, ids=[json.dumps(s)[:40] for s, _ in HIDDEN])
def test_the_grammar_answers_as_the_validator_does(schema, documents):
    grammar = Grammar.parse(schema_to_gbnf(schema))
    formats = jsonschema.validators.validator_for(schema)(schema, format_checker=jsonschema.FormatChecker())
    for text in documents:
        assert accepts(grammar, text) == formats.is_valid(json.loads(text)), (schema, text)


def test_leap_seconds_only_at_23_59_60_utc():
    # RFC 3339: second 60 is a leap second, which happens at 23:59:60 UTC (the validator's checker refuses them all)
    grammar = Grammar.parse(schema_to_gbnf({"type": "string", "format": "time"}))
    for text, ok in [("23:59:60Z", True), ("23:59:60+00:00", True), ("23:59:60-00:00", True), ("22:59:60Z", False),
                     ("23:58:60Z", False), ("00:59:60+01:00", True), ("00:59:60-01:00", False),
                     ("15:59:60.25-08:00", True), ("15:59:60-07:00", False), ("00:00:60+00:01", True),
                     ("23:59:59Z", True), ("12:00:00.5z", True), ("24:00:00Z", False), ("23:60:00Z", False)]:
        assert accepts(grammar, json.dumps(text)) == ok, text


@pytest.mark.parametrize("fmt, cases", [
    ("ipv4", [("0.0.0.0", True), ("255.255.255.255", True), ("192.168.0.1", True), ("256.1.1.1", False),
              ("01.2.3.4", False), ("1.2.3", False), ("1.2.3.4.5", False), ("1.2.3.4 ", False)]),
    ("json-pointer", [("", True), ("/", True), ("/a~0b/~1/%", True), ('/q"\\\\', True), ("/é", True),
                      ("a", False), ("/~", False), ("/~2", False), ("#/a", False)]),
    ("relative-json-pointer", [("0", True), ("0#", True), ("12/a/0", True), ("01", False), ("-1/a", False),
                               ("#", False), ("0##", False)]),
])
def test_formats_as_their_rfcs_have_them(fmt, cases):
    grammar = Grammar.parse(schema_to_gbnf({"type": "string", "format": fmt}))
    for text, ok in cases:
        for spelled in {json.dumps(text), json.dumps(text, ensure_ascii=False)}:
            assert accepts(grammar, spelled) == ok, (fmt, spelled)
