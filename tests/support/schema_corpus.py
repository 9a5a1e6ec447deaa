"""The JSON Schema corpus (tests/data/schemas/*.json) and a generator of random documents that validate against
its schemas, written the way the grammars expect (declared property order, plain decimals). Shared by the
converter tests, the grammar benchmark and the end-to-end tests."""
from __future__ import annotations

import datetime
import json
import random
import uuid
from pathlib import Path

from llmchat.grammar.regex import Alt, Chars, Regex, Repeat, Seq, parse_regex

SCHEMA_DIR = Path(__file__).parents[1] / "data" / "schemas"


def schema_files() -> list[Path]:
    return sorted(SCHEMA_DIR.glob("*.json"))


def load_schemas() -> dict[str, dict]:
    """name (file stem) -> schema."""
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in schema_files()}


# ------------------------------------------------------------------------------------------------ regex strings
def regex_sample(tree, rng: random.Random, ascii_only: bool = True) -> str:
    """A random string the regex tree matches in full."""
    if isinstance(tree, Regex):
        tree = tree.tree
    if isinstance(tree, Chars):
        ranges = tree.ranges
        if ascii_only:
            printable = [(max(lo, 0x20), min(hi, 0x7E)) for lo, hi in ranges if lo <= 0x7E and hi >= 0x20]
            ranges = printable or [(lo, min(hi, lo + 200)) for lo, hi in ranges]
        lo, hi = rng.choice(ranges)
        return chr(rng.randint(lo, hi))
    if isinstance(tree, Seq):
        return "".join(regex_sample(t, rng, ascii_only) for t in tree.items)
    if isinstance(tree, Alt):
        return regex_sample(rng.choice(tree.options), rng, ascii_only)
    if isinstance(tree, Repeat):
        hi = tree.lo + 3 if tree.hi is None else min(tree.hi, tree.lo + 3)
        return "".join(regex_sample(tree.item, rng, ascii_only) for _ in range(rng.randint(tree.lo, hi)))
    raise TypeError(tree)


# ------------------------------------------------------------------------------------------------ documents
_TEXT = "abcxyz ABC019_-.,:;!?/'\"\\\t\néü日本😀"


class DocGenerator:
    def __init__(self, root: dict, rng: random.Random) -> None:
        self.root = root
        self.rng = rng

    def resolve(self, ref: str):
        node = self.root
        for part in ref[2:].split("/") if ref != "#" else []:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def text(self, lo: int = 0, hi: int | None = None) -> str:
        hi = lo + 8 if hi is None else min(hi, lo + 8)
        return "".join(self.rng.choice(_TEXT) for _ in range(self.rng.randint(lo, hi)))

    def any_value(self, depth: int):
        kinds = ["s", "i", "n", "b", "z"] + (["o", "a"] if depth < 3 else [])
        k = self.rng.choice(kinds)
        return {"s": lambda: self.text(), "i": lambda: self.rng.randint(-1000, 1000),
                "n": lambda: round(self.rng.uniform(-100, 100), 3), "b": lambda: self.rng.random() < 0.5,
                "z": lambda: None,
                "o": lambda: {self.text(1, 5): self.any_value(depth + 1) for _ in range(self.rng.randint(0, 3))},
                "a": lambda: [self.any_value(depth + 1) for _ in range(self.rng.randint(0, 3))]}[k]()

    def gen(self, s, depth: int = 0):
        rng = self.rng
        if s is True or s == {} or (isinstance(s, dict) and set(s) <= {"title", "description", "default"}):
            return self.any_value(depth)
        if "$ref" in s:
            return self.gen(self.resolve(s["$ref"]), depth + 1)
        if "allOf" in s:  # the corpus only merges object parts
            merged: dict = {"type": "object", "properties": {}, "required": []}
            for part in s["allOf"]:
                part = self.resolve(part["$ref"]) if "$ref" in part else part
                for name, sub in part.get("properties", {}).items():
                    merged["properties"].setdefault(name, {"allOf": []})["allOf"].append(sub)
                merged["required"] += part.get("required", [])
            for name, holder in merged["properties"].items():
                parts = holder["allOf"]
                merged["properties"][name] = parts[0] if len(parts) == 1 else {
                    "type": "integer", "minimum": max(p.get("minimum", -99) for p in parts),
                    "maximum": min(p.get("maximum", 99) for p in parts)}
            return self.gen(merged, depth)
        for key in ("anyOf", "oneOf"):
            if key in s:
                return self.gen(rng.choice(s[key]), depth + 1)
        if s.get("nullable") and rng.random() < 0.3:
            return None
        if "const" in s:
            return s["const"]
        if "enum" in s:
            t = s.get("type")
            values = [v for v in s["enum"] if t is None or (v is None) == (t == "null" or "null" in t) or
                      isinstance(v, str) and ("string" == t or "string" in t)]
            return rng.choice(values or s["enum"])
        t = s.get("type")
        if t is None:
            t = "object" if "properties" in s else "string" if "maxLength" in s else None
            if t is None:
                return self.any_value(depth)
        if isinstance(t, list):
            t = rng.choice(t)
        return getattr(self, "g_" + t)(s, depth)

    def g_null(self, s, depth):
        return None

    def g_boolean(self, s, depth):
        return self.rng.random() < 0.5

    def bounds(self, s, integer: bool):
        lo, hi = s.get("minimum"), s.get("maximum")
        xlo, xhi = s.get("exclusiveMinimum"), s.get("exclusiveMaximum")
        step = 1 if integer else 0.001
        if xlo is True:
            lo += step
        elif xlo is not None and xlo is not False:
            lo = xlo + step
        if xhi is True:
            hi -= step
        elif xhi is not None and xhi is not False:
            hi = xhi - step
        lo = -10 ** 6 if lo is None else lo
        hi = (lo + 10 ** 6) if hi is None else hi
        return lo, hi

    def g_integer(self, s, depth):
        lo, hi = self.bounds(s, True)
        edge = [lo, hi, lo + (hi - lo) // 2]
        return int(self.rng.choice(edge) if self.rng.random() < 0.3 else self.rng.randint(int(lo), int(hi)))

    def g_number(self, s, depth):
        lo, hi = self.bounds(s, False)
        if self.rng.random() < 0.2:
            return int(self.rng.randint(int(-(-lo // 1)), int(hi // 1))) if int(-(-lo // 1)) <= hi // 1 else lo
        return min(max(round(self.rng.uniform(lo, hi), 3), lo), hi)

    def g_string(self, s, depth):
        fmt = s.get("format")
        rng = self.rng
        if fmt == "uuid":
            return str(uuid.UUID(int=rng.getrandbits(128)))
        if fmt in ("date", "date-time", "time"):
            d = datetime.date(1990, 1, 1) + datetime.timedelta(days=rng.randint(0, 20000))
            t = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}" + \
                rng.choice(["", ".123"]) + rng.choice(["Z", "+02:00", "-11:30"])
            return {"date": d.isoformat(), "time": t, "date-time": f"{d.isoformat()}T{t}"}[fmt]
        if "pattern" in s:
            regex = parse_regex(s["pattern"])
            body = regex_sample(regex, rng)
            pre = "" if regex.anchored_start else self.text(0, 3)
            post = "" if regex.anchored_end else self.text(0, 3)
            return pre + body + post
        return self.text(s.get("minLength", 0), s.get("maxLength"))

    def g_array(self, s, depth):
        rng = self.rng
        prefix = s.get("prefixItems") or (s["items"] if isinstance(s.get("items"), list) else [])
        rest = s.get("additionalItems", True) if isinstance(s.get("items"), list) else s.get("items", True)
        lo = s.get("minItems", 0)
        hi = s.get("maxItems", lo + (1 if depth > 3 else 3))
        if rest is False:
            hi = min(hi, len(prefix))
        n = rng.randint(lo, max(lo, min(hi, lo + 3)))
        return [self.gen(prefix[i] if i < len(prefix) else rest, depth + 1) for i in range(n)]

    def g_object(self, s, depth):
        rng = self.rng
        out = {}
        required = s.get("required", [])
        for name, sub in s.get("properties", {}).items():
            if name in required or (rng.random() < 0.5 and depth < 6):
                out[name] = self.gen(sub, depth + 1)
        extra = s.get("additionalProperties", True)
        if extra is not False and rng.random() < 0.3:
            for i in range(rng.randint(1, 2)):
                key = "x_" + self.text(0, 4)
                if key not in out:
                    out[key] = self.gen(extra, depth + 1) if extra is not True else self.any_value(depth + 1)
        return out


def generate(schema: dict, rng: random.Random):
    return DocGenerator(schema, rng).gen(schema)


def serializations(doc) -> list[str]:
    """The whitespace and escaping variants the grammars must accept (raw DEL is always escaped)."""
    out = [json.dumps(doc), json.dumps(doc, separators=(",", ":")), json.dumps(doc, indent=2),
           json.dumps(doc, ensure_ascii=False, indent="\t"), json.dumps(doc, ensure_ascii=False)]
    return [t.replace("\x7f", "\\u007f") for t in dict.fromkeys(out)]
