"""The JSON-Schema-Test-Suite (draft 2020-12) against llmchat's JSON-schema grammars.

Each group's schema is compiled as a `response_format: json_schema` request compiles it (schema_to_gbnf), and each
instance is matched by a fresh matcher, over its bytes, in the ordinary serializations a model or a program writes:
json.dumps compact, default and indent=2, and JavaScript's JSON.stringify (its number spelling, characters
unescaped), every object's keys in the order the schema names them. A group ends in one of three outcomes:
compiled (then every valid instance must match in every serialization and no invalid one in any), refused
(UnsupportedSchemaError naming the keywords' paths, or GrammarError for a schema nothing satisfies), or a crash.

    .venv/bin/python tools/build/fetch_json_schema_suite.py --if-missing     # the suite, from PyPI
    .venv/bin/python tools/reference/json_schema_suite.py [--json] [--failures] [--refusals]

`--engine llguidance` runs llguidance's JSON compiler on the same files, matched the same way, for comparison; it
needs llguidance installed (in an environment of its own: `python -m venv /tmp/llg && /tmp/llg/bin/pip install
llguidance`, then `PYTHONPATH=<a folder whose llmchat links to core/> /tmp/llg/bin/python ...`).

Two files are left out: refRemote.json and vocabulary.json need documents from a remote server. `format` is asserted,
as the format-assertion vocabulary has it (optional/format/ tests it): format.json's strings that expect an
annotation only ("... is only an annotation by default") count as invalid here.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from llmchat.errors import GrammarError, UnsupportedSchemaError
from llmchat.grammar import Grammar, schema_to_gbnf
from llmchat.grammar.json_text import js_number

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build"))
from fetch_json_schema_suite import suite_dir  # noqa: E402 (the folder it unpacks the suite into)

LEFT_OUT = {"refRemote.json", "vocabulary.json"}


@dataclass
class Instance:
    description: str
    data: object  # numbers other than integers as Decimal, spelled by each serialization
    valid: bool


@dataclass
class Group:
    file: str
    description: str
    schema: object
    tests: list[Instance]

    @property
    def name(self) -> str:
        return f"{self.file}: {self.description}"


@dataclass
class Result:
    group: Group
    outcome: str  # "compiled", "refused", "crash"
    error: str = ""
    seconds: float = 0.0
    accepted_invalid: list[str] = field(default_factory=list)  # "instance description [serialization]"
    rejected_valid: list[str] = field(default_factory=list)


def load(root: Path | None = None) -> list[Group]:
    root = root or suite_dir()
    files = sorted(p for p in root.rglob("*.json") if p.name not in LEFT_OUT or p.parent != root)
    if not files:
        raise SystemExit(f"no test suite in {root}: run tools/build/fetch_json_schema_suite.py")
    groups = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        plain, exact = json.loads(text), json.loads(text, parse_float=Decimal)
        for g, e in zip(plain, exact):
            tests = [Instance(t["description"], x["data"], t["valid"] and not _format_annotation(path, t))
                     for t, x in zip(g["tests"], e["tests"])]
            groups.append(Group(path.relative_to(root).as_posix(), g["description"], g["schema"], tests))
    return groups


def _format_annotation(path: Path, test: dict) -> bool:
    return path.name == "format.json" and path.parent.name != "format" and "only an annotation" in test["description"]


# --- serializations --------------------------------------------------------------------------------------------

STYLES = {  # name: (item separator, key separator, indent, number spelling, ASCII only)
    "compact": (",", ":", None, lambda x: repr(x), True),
    "default": (", ", ": ", None, lambda x: repr(x), True),
    "indent2": (",", ": ", 2, lambda x: repr(x), True),
    "js": (",", ":", None, js_number, False),
}


def dump(value, style: str, order: dict[str, int], level: int = 0) -> str:
    item_sep, key_sep, indent, number, ascii_only = STYLES[style]
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        x = float(value)
        if not math.isfinite(x):
            raise ValueError("a number no serialization writes")
        return number(x)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=ascii_only)
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: order.get(k, len(order)))  # stable: unnamed keys keep their order
        parts = [json.dumps(k, ensure_ascii=ascii_only) + key_sep + dump(value[k], style, order, level + 1)
                 for k in keys]
        opener, closer = "{", "}"
    else:
        parts = [dump(v, style, order, level + 1) for v in value]
        opener, closer = "[", "]"
    if not parts:
        return opener + closer
    if indent is None:
        return opener + item_sep.join(parts) + closer
    pad, inner = "\n" + " " * (indent * level), "\n" + " " * (indent * (level + 1))
    return opener + inner + (item_sep + inner).join(parts) + pad + closer


def key_order(schema) -> dict[str, int]:
    """Property names in the order the schema first names them (properties, required, const values...)."""
    order: dict[str, int] = {}
    todo = [schema]
    while todo:
        node = todo.pop(0)
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("properties", "dependentRequired", "dependentSchemas") and isinstance(value, dict):
                    for name in value:
                        order.setdefault(name, len(order))
                elif key in ("const", "enum"):  # the order of an object value's own keys
                    for v in value if key == "enum" and isinstance(value, list) else [value]:
                        for name in v if isinstance(v, dict) else ():
                            order.setdefault(name, len(order))
                elif key == "required" and isinstance(value, list):
                    for name in value:
                        if isinstance(name, str):
                            order.setdefault(name, len(order))
                todo.append(value)
        elif isinstance(node, list):
            todo.extend(node)
    return order


# --- running ---------------------------------------------------------------------------------------------------

class Llmchat:
    """llmchat's JSON-schema grammars: compile(schema) -> a matcher factory, or raise to refuse."""
    refusals = (UnsupportedSchemaError, GrammarError)

    @staticmethod
    def compile(schema):
        grammar = Grammar.parse(schema_to_gbnf(schema))

        def matches(data: bytes) -> bool:
            m = grammar.matcher()
            return m.advance(data) and m.can_end
        return matches


class Llguidance:
    """llguidance's JSON compiler over a byte tokenizer, for comparison."""

    class Refused(Exception):
        pass
    refusals = (Refused,)

    def __init__(self) -> None:
        from llguidance import LLMatcher, LLTokenizer
        self.matcher, self.tokenizer = LLMatcher, LLTokenizer("byte")

    def compile(self, schema):
        grammar = self.matcher.grammar_from_json_schema(schema)
        probe = self.matcher(self.tokenizer, grammar)
        if probe.is_error():
            raise self.Refused(probe.get_error())

        def matches(data: bytes) -> bool:
            m = self.matcher(self.tokenizer, grammar)
            return m.consume_tokens(self.tokenizer.tokenize_bytes(data)) and m.is_accepting()
        return matches


def run_group(group: Group, engine=Llmchat) -> Result:
    start = time.perf_counter()
    try:
        matches = engine.compile(group.schema)
    except engine.refusals as exc:
        return Result(group, "refused", f"{type(exc).__name__}: {exc}", time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - a crash is an outcome this tool reports
        return Result(group, "crash", f"{type(exc).__name__}: {exc}", time.perf_counter() - start)
    result = Result(group, "compiled")
    order = key_order(group.schema)
    for test in group.tests:
        for style in STYLES:
            try:
                text = dump(test.data, style, order)
            except ValueError:
                continue
            try:
                matched = matches(text.encode("utf-8"))
            except GrammarError as exc:
                result.outcome, result.error = "crash", f"{test.description} [{style}]: {exc}"
                break
            if matched and not test.valid:
                result.accepted_invalid.append(f"{test.description} [{style}]")
            elif not matched and test.valid:
                result.rejected_valid.append(f"{test.description} [{style}]")
    result.seconds = time.perf_counter() - start
    return result


def summary(results: list[Result]) -> dict:
    compiled = [r for r in results if r.outcome == "compiled"]

    def instances(rs: list[Result], attr: str) -> int:
        return len({(r.group.name, s.rsplit(" [", 1)[0]) for r in rs for s in getattr(r, attr)})
    core = [r for r in results if not r.group.file.startswith("optional/")]
    return {
        "groups": len(results),
        "compiled": len(compiled),
        "core groups (not optional/)": len(core),
        "core groups compiled": sum(r.outcome == "compiled" for r in core),
        "core: invalid instances accepted": instances([r for r in core if r.outcome == "compiled"], "accepted_invalid"),
        "core: valid instances rejected": instances([r for r in core if r.outcome == "compiled"], "rejected_valid"),
        "refused": sum(r.outcome == "refused" for r in results),
        "crashed": sum(r.outcome == "crash" for r in results),
        "valid instances in compiled groups": sum(t.valid for r in compiled for t in r.group.tests),
        "invalid instances accepted": instances(compiled, "accepted_invalid"),
        "valid instances rejected": instances(compiled, "rejected_valid"),
        "slowest group (s)": round(max((r.seconds for r in results), default=0.0), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object: the summary and every group")
    parser.add_argument("--failures", action="store_true", help="list the groups with a wrong answer or a crash")
    parser.add_argument("--refusals", action="store_true", help="list the refused groups and why")
    parser.add_argument("--engine", choices=("llmchat", "llguidance"), default="llmchat")
    args = parser.parse_args()
    engine = Llguidance() if args.engine == "llguidance" else Llmchat
    results = [run_group(g, engine) for g in load()]
    if args.json:
        print(json.dumps({"summary": summary(results), "groups": [
            {"group": r.group.name, "outcome": r.outcome, "error": r.error, "seconds": round(r.seconds, 4),
             "accepted_invalid": r.accepted_invalid, "rejected_valid": r.rejected_valid} for r in results]},
            indent=1))
        return 0
    for key, value in summary(results).items():
        print(f"{key:36} {value}")
    for r in results:
        if args.failures and (r.outcome == "crash" or r.accepted_invalid or r.rejected_valid):
            print(f"\n{r.group.name}: {r.outcome} {r.error}")
            for s in r.accepted_invalid:
                print(f"   accepted although invalid: {s}")
            for s in r.rejected_valid:
                print(f"   rejected although valid: {s}")
        if args.refusals and r.outcome == "refused":
            print(f"{r.group.name}: {r.error[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
