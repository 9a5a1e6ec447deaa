"""Time the grammar engine on real vocabularies while walking a JSON document token by token; prints JSON.

    .venv/bin/python tools/grammar_bench.py [MODEL.gguf ...]     (default: the SmolLM2 and Gemma 3 test models)

Per model: compile time of the grammar, build time of the VocabIndex, and per token of the document
- allowed_cold: a freshly compiled grammar (no automaton transitions yet) and an empty allowed-set cache,
- allowed_uncached: the automaton already built, the allowed-set cache emptied before every call,
- allowed_new_context: only whole states forgotten, the walks of their context-free part kept (what a state at a
  new nesting depth costs),
- allowed_cached: the same walk again (every state seen before),
- allows: the single-token check for the document's next token and for 64 random tokens,
each as p50/p99/max in milliseconds (allows in microseconds).
"""
from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

from llmchat.catalogue import resolve
from llmchat.gguf import open_gguf
from llmchat.grammar import VocabIndex, gbnf
from llmchat.grammar.grammar import Grammar
from llmchat.tokenizer import Tokenizer

JSON_GBNF = r'''
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,16})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
'''

DOCUMENT = {
    "id": "order-20931", "customer": {"name": "Ada Lovelace", "email": "ada@example.org", "vip": True,
                                      "address": {"street": "12 St James's Square", "city": "London",
                                                  "postcode": "SW1Y 4JH", "country": "GB"}},
    "items": [{"sku": "A-100", "title": "Analytical engine, brass", "qty": 1, "price": 12999.5},
              {"sku": "B-7", "title": "Punched cards (box of 500)", "qty": 12, "price": 4.25},
              {"sku": "C-42", "title": "Caf\u00e9 cr\u00e8me \u2014 \u00e0 emporter", "qty": 2, "price": 3.1e0}],
    "notes": "Deliver before noon; ring twice. \"Fragile\" \u2713",
    "tags": ["priority", "gift", "\u6570\u5b66"], "discount": -0.15, "paid": False, "coupon": None,
}


def _ms(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(round(0.99 * (len(values) - 1))))]
    return {"p50_ms": round(statistics.median(values) * 1e3, 4), "p99_ms": round(p99 * 1e3, 4),
            "max_ms": round(values[-1] * 1e3, 4), "mean_ms": round(statistics.fmean(values) * 1e3, 4)}


def bench(path: Path) -> dict:
    with open_gguf(path) as f:
        tok = Tokenizer.from_metadata(f.metadata)
    t0 = time.perf_counter()
    index = VocabIndex(tok)
    index_s = time.perf_counter() - t0
    compile_times = []
    for _ in range(5):
        t0 = time.perf_counter()
        grammar = Grammar(gbnf.parse(JSON_GBNF), "root")  # not Grammar.parse: that would hit its cache
        compile_times.append(time.perf_counter() - t0)
    text = json.dumps(DOCUMENT, indent=1, ensure_ascii=False)
    ids = tok.encode(text)
    assert tok.decode(ids) == text

    def walk(kind: str) -> tuple[list[float], list[int]]:
        times, sizes = [], []
        m = grammar.matcher()
        for tid in ids:
            if kind == "uncached":
                index._cache.clear()
                index._cached_ids = 0
            elif kind == "new_context":  # keep the relative walks, forget whole states (as at a new depth)
                for key in [k for k in index._cache if len(k) == 2]:
                    del index._cache[key]
            t = time.perf_counter()
            allowed = index.allowed(m)
            times.append(time.perf_counter() - t)
            sizes.append(len(allowed))
            if tid not in allowed or not index.advance(m, tid):
                raise AssertionError(f"the grammar refuses token {tid} {tok.token_text(tid)!r}")
        if not m.can_end:
            raise AssertionError("the document does not complete the grammar")
        return times, sizes

    cold, sizes = walk("cold")
    uncached, _ = walk("uncached")
    new_context, _ = walk("new_context")
    index._cache.clear()
    index._cached_ids = 0
    walk("fill")
    cached, _ = walk("cached")

    rng = random.Random(0)
    allows_next, allows_random = [], []
    m = grammar.matcher()
    for tid in ids:
        t = time.perf_counter()
        index.allows(m, tid)
        allows_next.append(time.perf_counter() - t)
        for other in rng.sample(range(tok.vocab_size), 64):
            t = time.perf_counter()
            index.allows(m, other)
            allows_random.append(time.perf_counter() - t)
        index.advance(m, tid)
    us = lambda v: {k.replace("_ms", "_us"): round(x * 1e3, 2) for k, x in _ms(v).items()}  # noqa: E731
    return {
        "model": path.name, "vocab_size": tok.vocab_size, "trie_nodes": len(index._node_byte),
        "document_tokens": len(ids), "document_bytes": len(text.encode()),
        "compile_ms": round(min(compile_times) * 1e3, 3), "vocab_index_s": round(index_s, 3),
        "allowed_tokens": {"median": statistics.median(sizes), "max": max(sizes), "min": min(sizes)},
        "allowed_cold": _ms(cold), "allowed_uncached": _ms(uncached),
        "allowed_new_context": _ms(new_context), "allowed_cached": _ms(cached),
        "allows_next_token": us(allows_next), "allows_random_token": us(allows_random),
        "bitset_max_ms": round(_bitset_time(index, grammar, ids) * 1e3, 3),
    }


def _bitset_time(index: VocabIndex, grammar: Grammar, ids: list[int]) -> float:
    """Slowest GPU-mask build along the walk, each state's set freshly computed (relative walks kept): a mask is
    packed from the walk's flags, or copied from the shared part and patched with the few context-decided ids."""
    m = grammar.matcher()
    worst = 0.0
    for tid in ids:
        for key in [k for k in index._cache if len(k) == 2]:
            del index._cache[key]
        allowed = index.allowed(m)
        t = time.perf_counter()
        allowed.bitset()
        worst = max(worst, time.perf_counter() - t)
        index.advance(m, tid)
    return worst


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]] or [Path(resolve("smollm2")), Path(resolve("gemma3-270m"))]
    print(json.dumps([bench(p) for p in paths], indent=1))


if __name__ == "__main__":
    main()
