"""Constrained decoding's speed, side by side with llguidance, and a cross-check of the allowed tokens.

For every schema of the corpus (tests/data/schemas/*.json) and every vocabulary (SmolLM2 49k, Gemma 3 262k, read
from the GGUFs in ~/.cache/llmchat/models), one valid document is generated (tests/support/schema_corpus.py), tokenized with
llmchat's tokenizer, and that one token sequence is walked by both engines:

  llmchat     Grammar.parse(gbnf) + VocabIndex, the GBNF from llmchat.grammar.json_schema.schema_to_gbnf, or with
              --gbnf-source llamacpp from llama.cpp's converter (llama-cpp-python's port, in its own venv):
                compile      Grammar.parse with its cache bypassed
                first walk   `allowed` on a fresh grammar (lazy automaton and allowed-set cache both cold); the
                             p50/p99 over the steps where the cache missed are the "uncached first visit" figures
                warm walk    the same document again on a second VocabIndex: automaton warm, allowed-set cache cold
                             (p50/p99 over its cache misses)
                cached walk  the first index again: every `allowed` is a cache hit
                allows       the single-token check of the next token (the sampler's candidates path), and of
                             one rejected token per step
                bitset       AllowedSet.bitset() the first time (the GPU mask)
  llguidance  (peer venv) on a tokenizer built from the same token bytes, with the same end-of-generation ids:
                gbnf    our GBNF text, converted by llguidance's own gbnf_to_lark
                schema  llguidance's JSON Schema compiler on the schema itself
              compile = LLMatcher construction; mask = compute_bitmask per step, first walk and after reset().

Cross-check: at every state of the walk, llmchat's allowed set plus the EOG ids when `can_end` against llguidance's
mask. With `gbnf` the two engines see the same language, so the one expected difference is llguidance's policy for
bytes the grammar forces (it allows only the tokenizer's canonical token for them, where llmchat allows every token
spelling a prefix: class `forced-prefix`); anything else is a defect of one side. With `schema` the JSON policies
differ too (whitespace, number forms, string escapes, formats, bounds), and each difference is classified
(`other`: a class this tool cannot name, to be read in the listed tokens).

  .venv/bin/python tools/bench/grammar_bench.py [--schemas DIR] [--gbnf-source llmchat|llamacpp] [--vocab smollm2,gemma3]
                                          [--json out.json] [--test-data tests/data/grammar_crosscheck.json]
  .venv/bin/python tools/bench/grammar_bench.py --pyodide [--pyodide-schemas a,b,c]   # the llmchat walk inside Pyodide

llguidance lives in its own venv (default ~/.cache/llmchat-peers/grammar-venv, `pip install llguidance numpy`),
never in the project's dependencies; its site-packages is put on sys.path. This file's top level uses only the
standard library and llmchat, because `--inner` runs it inside Pyodide.
"""
from __future__ import annotations

import argparse
import base64
import glob
import json
import os
import statistics
import subprocess
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(os.environ.get("LLMCHAT_HOME", Path.home() / ".cache" / "llmchat")) / "models"
VOCABS = {"smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3": "gemma-3-270m-q4_k_m.gguf"}
PEER_VENV = Path.home() / ".cache" / "llmchat-peers" / "grammar-venv"


# ------------------------------------------------------------------------------------------------- statistics
def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def summary_us(ns: list[int]) -> dict:
    us = [v / 1000 for v in ns]
    return {"n": len(us), "p50_us": _r(pct(us, 50)), "p99_us": _r(pct(us, 99)), "max_us": _r(max(us, default=None))}


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


# ------------------------------------------------------------------------------------------------- llmchat side
def load_tokenizer(path: Path):
    from llmchat.gguf.file import open_gguf
    from llmchat.tokenizer.tokenizer import Tokenizer
    with open_gguf(str(path)) as g:
        return Tokenizer.from_metadata(g.metadata)


def compile_llmchat(gbnf_text: str):
    """Grammar.parse's work without its LRU cache, so each call compiles afresh."""
    from llmchat.grammar import gbnf
    from llmchat.grammar.grammar import Grammar
    t0 = time.perf_counter_ns()
    grammar = Grammar(gbnf.parse(gbnf_text, None), "root")
    return grammar, time.perf_counter_ns() - t0


def walk_llmchat(gbnf_text: str, tokens: list[int], first, second, eog: frozenset[int],
                 keep_sets: bool = True) -> dict:
    """Time llmchat along `tokens` (see the module docstring). `first`/`second`: two VocabIndex of one vocabulary."""
    grammar, compile_ns = compile_llmchat(gbnf_text)
    n_vocab = first.vocab_size
    sets: list = []
    first_ns, first_miss, bitset_ns = [], [], []
    m = grammar.matcher()
    for step, tok in enumerate(tokens + [None]):
        misses = first.stats["misses"]
        t0 = time.perf_counter_ns()
        allowed = first.allowed(m)
        dt = time.perf_counter_ns() - t0
        first_ns.append(dt)
        if first.stats["misses"] > misses:
            first_miss.append(dt)
            t0 = time.perf_counter_ns()
            allowed.bitset()
            bitset_ns.append(time.perf_counter_ns() - t0)
        if keep_sets:
            sets.append((allowed, m.can_end))
        if tok is None:
            break
        if tok not in allowed and not (tok in eog and m.can_end):
            return {"error": f"llmchat rejects token {tok} at step {step} of the document"}
        first.advance(m, tok)
    can_end = m.can_end
    warm_ns = _timed_walk(grammar, second, tokens, misses_only=True)
    cached_ns = _timed_walk(grammar, first, tokens)
    allows_ok, allows_no = [], []
    m = grammar.matcher()
    for step, tok in enumerate(tokens):
        t0 = time.perf_counter_ns()
        ok = first.allows(m, tok)
        allows_ok.append(time.perf_counter_ns() - t0)
        assert ok, (step, tok)
        bad = _a_rejected_token(first, m, step, n_vocab)
        if bad is not None:
            t0 = time.perf_counter_ns()
            ok = first.allows(m, bad)
            allows_no.append(time.perf_counter_ns() - t0)
            assert not ok
        first.advance(m, tok)
    return {"compile_us": round(compile_ns / 1000, 1), "can_end_at_end": can_end,
            "allowed_first_walk": summary_us(first_ns), "allowed_uncached_first_visit": summary_us(first_miss),
            "allowed_warm_automaton_uncached": summary_us(warm_ns), "allowed_cached": summary_us(cached_ns),
            "bitset_first": summary_us(bitset_ns), "allows_accepted": summary_us(allows_ok),
            "allows_rejected": summary_us(allows_no), "_sets": sets}


def _timed_walk(grammar, index, tokens: list[int], misses_only: bool = False) -> list[int]:
    out = []
    m = grammar.matcher()
    for tok in tokens + [None]:
        misses = index.stats["misses"]
        t0 = time.perf_counter_ns()
        index.allowed(m)
        dt = time.perf_counter_ns() - t0
        if not misses_only or index.stats["misses"] > misses:
            out.append(dt)
        if tok is not None:
            index.advance(m, tok)
    return out


def _a_rejected_token(index, m, step: int, n_vocab: int) -> int | None:
    # A deterministic, spread-out probe: the first rejected id from a stride through the vocabulary.
    for k in range(64):
        t = (step * 7919 + k * 104729) % n_vocab
        if index.symbols(t) is not None and not index.allows(m, t):
            return t
    return None


# ------------------------------------------------------------------------------------------------ llguidance side
def import_llguidance(venv: Path):
    site = glob.glob(str(venv / "lib" / "python3*" / "site-packages"))
    if not site:
        raise SystemExit(f"llguidance venv not found at {venv}: python3 -m venv {venv} && "
                         f"{venv}/bin/pip install llguidance numpy")
    sys.path.append(site[0])
    import llguidance  # noqa: F401
    return llguidance


class _TokenizerForLLG:
    """What llguidance.TokenizerWrapper reads: token bytes (0xFF-prefixed where llmchat treats a token as special,
    llguidance's own marker), EOS, BOS, and an encoder for its tokenize_* helpers (unused by masks)."""

    def __init__(self, tok) -> None:
        self.tokens = [b"\xff" + tok.token_bytes(i) if tok.is_control(i) or i in tok.eog_ids else tok.token_bytes(i)
                       for i in range(tok.vocab_size)]
        self.special_token_ids = [i for i, t in enumerate(self.tokens) if t[:1] == b"\xff"]
        self.eos_token_id = tok.eos_id
        self.bos_token_id = tok.bos_id
        self._tok = tok

    def __call__(self, data: bytes) -> list[int]:
        return self._tok.encode(data.decode("utf-8", "replace"))


def llg_tokenizer(llg, tok):
    return llg.LLTokenizer(llg.TokenizerWrapper(_TokenizerForLLG(tok)), eos_token=sorted(tok.eog_ids))


def walk_llguidance(llg, lltok, grammar_def: str, tokens: list[int]) -> dict:
    t0 = time.perf_counter_ns()
    m = llg.LLMatcher(lltok, grammar_def, log_level=0)
    compile_ns = time.perf_counter_ns() - t0
    if m.is_error():
        return {"error": m.get_error()[:500]}
    masks, forced, first = [], [], []
    for step, tok in enumerate(tokens + [None]):
        t0 = time.perf_counter_ns()
        mask = m.compute_bitmask()
        first.append(time.perf_counter_ns() - t0)
        masks.append(mask)
        forced.append(m.compute_ff_bytes())  # untimed: only to explain differences
        if tok is None:
            break
        if not m.consume_token(tok):
            return {"error": f"rejects token {tok} at step {step}: {m.get_error()[:300]}", "_masks": masks}
    accepting = m.is_accepting()
    m.reset()
    again = []
    for tok in tokens + [None]:
        t0 = time.perf_counter_ns()
        m.compute_bitmask()
        again.append(time.perf_counter_ns() - t0)
        if tok is not None:
            m.consume_token(tok)
    return {"compile_us": round(compile_ns / 1000, 1), "accepting_at_end": accepting,
            "mask_first_walk": summary_us(first), "mask_second_walk": summary_us(again), "_masks": masks,
            "_forced": forced}


# ----------------------------------------------------------------------------------------------- cross-check
def mask_ids(mask: bytes, n_vocab: int) -> set[int]:
    import numpy as np
    bits = np.unpackbits(np.frombuffer(mask, dtype=np.uint8), bitorder="little")[:n_vocab]
    return set(np.flatnonzero(bits).tolist())


def _json_context(prefix: bytes) -> str:
    """Where the document prefix stands: 'string', 'string-escape' (right after a backslash in a string), 'number'
    (right after a number's character), or 'between'."""
    in_str = esc = False
    last = b""
    for c in prefix:
        ch = bytes([c])
        if in_str:
            if esc:
                esc = False
            elif ch == b"\\":
                esc = True
            elif ch == b'"':
                in_str = False
        elif ch == b'"':
            in_str = True
        last = ch
    if in_str:
        return "string-escape" if esc else "string"
    return "number" if last in b"0123456789.eE+-" and last else "between"


def classify(piece: bytes, context: str, forced: bytes) -> str:
    """Why a token may legitimately differ between two JSON policies (a best effort: 'other' means look at it).

    forced-prefix: llguidance allows only the canonical tokenization of bytes the grammar forces (it asks the
    tokenizer for them), where llmchat allows every token that spells a prefix of them."""
    if piece[:1] == b"\xff":
        return "special"
    if forced and (forced.startswith(piece) or piece.startswith(forced)):
        return "forced-prefix"
    if context == "string-escape":
        return "string-escape"
    if context != "string" and piece.strip(b" \t\r\n") != piece and piece.strip(b" \t\r\n") is not None:
        return "whitespace"
    if context == "number" or piece[:1] in b"-0123456789" and context == "between":
        if all(c in b"0123456789.eE+- \t\n\r,]}" for c in piece):
            return "number-format"
    if context == "string":
        if b"\\" in piece:
            return "string-escape"
        if any(c < 0x20 or c == 0x7F for c in piece):
            return "string-control-char"
    return "other"


def compare(sets: list, masks: list[bytes], forced: list[bytes], tokens: list[int], tok, eog: frozenset[int],
            n_vocab: int, cap: int = 40) -> dict:
    """State-by-state comparison; every mismatch is counted, the first `cap` per side and state are listed."""
    states, agreed, details = 0, [], []
    by_class: dict[str, int] = {}
    prefix = b""
    for step, ((allowed, can_end), mask) in enumerate(zip(sets, masks)):
        ours = set(allowed)
        if can_end:
            ours |= eog
        theirs = mask_ids(mask, n_vocab)
        states += 1
        if ours == theirs:
            agreed.append(step)
        else:
            ctx = _json_context(prefix)
            entry = {"step": step, "prefix_tail": prefix[-40:].decode("utf-8", "replace"), "context": ctx,
                     "llguidance_forced_bytes": forced[step].decode("utf-8", "replace"),
                     "n_llmchat": len(ours), "n_llguidance": len(theirs)}
            for side, diff in (("only_llmchat", ours - theirs), ("only_llguidance", theirs - ours)):
                listed = []
                for t in sorted(diff):
                    piece = tok.token_bytes(t) if not (tok.is_control(t) or t in eog) else b"\xff" + tok.token_bytes(t)
                    cls = classify(piece, ctx, forced[step])
                    by_class[f"{side}:{cls}"] = by_class.get(f"{side}:{cls}", 0) + 1
                    if len(listed) < cap:
                        listed.append({"id": t, "bytes": piece.decode("latin-1"), "class": cls})
                entry[side] = {"count": len(diff), "tokens": listed}
            details.append(entry)
        if step < len(tokens):
            prefix += tok.token_bytes(tokens[step])
    return {"states": states, "agree": len(agreed), "mismatch_states": len(details), "by_class": by_class,
            "mismatches": details, "_agreed_steps": agreed}


# ------------------------------------------------------------------------------------------------------- main
def llamacpp_converter(python: str):
    """schema -> GBNF by llama-cpp-python's port of llama.cpp's json_schema_to_grammar (in its own venv)."""
    code = ("import json, sys\nfrom llama_cpp.llama_grammar import json_schema_to_gbnf\n"
            "print(json.dumps(json_schema_to_gbnf(sys.stdin.read())))")

    def convert(schema) -> str:
        proc = subprocess.run([python, "-c", code], input=json.dumps(schema), capture_output=True, text=True)
        if proc.returncode:
            raise ValueError(proc.stderr.strip().splitlines()[-1])
        return json.loads(proc.stdout)
    return convert


def load_cases(schema_dir: Path, only: list[str] | None, gbnf_source: str = "llmchat") -> list[dict]:
    """Each schema with its GBNF and one document (tests/support/schema_corpus.py's generator, seeded by the schema's name,
    written as json.dumps(ensure_ascii=False) or, failing that, the first serialization the grammar accepts)."""
    import random
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from schema_corpus import generate, serializations
    if gbnf_source == "llmchat":
        from llmchat.grammar.json_schema import schema_to_gbnf
    else:
        schema_to_gbnf = llamacpp_converter(gbnf_source)
    if not schema_dir.is_dir():
        raise SystemExit(f"no schema corpus at {schema_dir}")
    cases = []
    for path in sorted(schema_dir.glob("*.json")):
        name = path.stem
        if only and name not in only:
            continue
        schema = json.loads(path.read_text())
        case = {"name": name, "schema": schema}
        try:
            case["gbnf"] = schema_to_gbnf(schema)
        except Exception as exc:  # a refusal (UnsupportedSchemaError) is a result, reported per schema
            case["error"] = f"schema_to_gbnf: {type(exc).__name__}: {exc}"
            cases.append(case)
            continue
        doc = generate(schema, random.Random(name))
        texts = [json.dumps(doc, ensure_ascii=False)] + serializations(doc)
        grammar, _ = compile_llmchat(case["gbnf"])
        for text in texts:
            m = grammar.matcher()
            if m.advance(text.encode()) and m.can_end:
                case["doc"] = text
                break
        else:
            case["error"] = f"the grammar rejects every serialization of the generated document {texts[0][:200]!r}"
        cases.append(case)
    return cases


def run_native(args) -> dict:
    from llmchat.grammar import VocabIndex
    llg = import_llguidance(Path(args.llguidance_venv))
    from llguidance.gbnf_to_lark import any_to_lark
    cases = load_cases(Path(args.schemas), args.only.split(",") if args.only else None, _gbnf_source(args))
    results, samples = [], []
    for vname in args.vocab.split(","):
        path = MODELS / VOCABS[vname]
        t0 = time.perf_counter()
        tok = load_tokenizer(path)
        first, second = VocabIndex(tok), VocabIndex(tok)
        index_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        lltok = llg_tokenizer(llg, tok)
        lltok_s = time.perf_counter() - t0
        print(f"{vname}: {tok.vocab_size} tokens; llmchat tokenizer+2 indexes {index_s:.1f} s, "
              f"llguidance tokenizer {lltok_s:.1f} s", file=sys.stderr)
        eog = frozenset(tok.eog_ids)
        for case in cases:
            row = {"schema": case["name"], "vocab": vname, "n_vocab": tok.vocab_size}
            if "error" in case:
                row["error"] = case["error"]
                results.append(row)
                continue
            tokens = tok.encode(case["doc"])
            row["doc_tokens"] = len(tokens)
            row["doc_bytes"] = len(case["doc"].encode())
            ours = walk_llmchat(case["gbnf"], tokens, first, second, eog)
            sets = ours.pop("_sets", None)
            row["llmchat"] = ours
            if "error" in ours:
                results.append(row)
                continue
            for mode in ("gbnf", "schema"):
                t0 = time.perf_counter_ns()
                try:
                    gdef = (llg.LLMatcher.grammar_from_lark(any_to_lark(case["gbnf"])) if mode == "gbnf" else
                            llg.LLMatcher.grammar_from_json_schema(case["schema"]))
                except Exception as exc:
                    row[f"llguidance_{mode}"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
                    continue
                conv_us = (time.perf_counter_ns() - t0) / 1000
                theirs = walk_llguidance(llg, lltok, gdef, tokens)
                masks = theirs.pop("_masks", None)
                forced = theirs.pop("_forced", None)
                theirs["convert_us"] = round(conv_us, 1)
                if masks and "error" not in theirs:
                    cmp = compare(sets, masks, forced, tokens, tok, eog, tok.vocab_size)
                    steps = cmp.pop("_agreed_steps")
                    theirs["crosscheck"] = cmp
                    samples.extend(_pick_samples(case, vname, mode, tokens, steps, sets, masks, args.samples))
                row[f"llguidance_{mode}"] = theirs
            results.append(row)
            _print_row(row)
    out = {"machine": _machine(), "gbnf_source": args.gbnf_source, "results": results,
           "summary": _summary(results)}
    if args.test_data:
        _write_test_data(Path(args.test_data), samples, cases, args.gbnf_source)
    return out


def _pick_samples(case, vname, mode, tokens, steps, sets, masks, per_case: int) -> list[dict]:
    """A few agreed states of this walk: the largest allowed set (typically inside a string), then states spread
    over the walk with set sizes not taken yet; the start state only when nothing else agreed."""
    if not steps or per_case <= 0:
        return []
    pool = [s for s in steps if s > 0] or steps
    chosen = [max(pool, key=lambda s: len(sets[s][0]))]
    sizes = {len(sets[chosen[0]][0])}
    for i in range(1, 4 * per_case):
        if len(chosen) == per_case:
            break
        s = pool[(i * len(pool)) // (4 * per_case)]
        if s not in chosen and len(sets[s][0]) not in sizes:
            chosen.append(s)
            sizes.add(len(sets[s][0]))
    return [{"schema": case["name"], "vocab": vname, "source": f"llguidance:{mode}", "prefix": tokens[:s],
             "n_allowed": bin(int.from_bytes(masks[s], "little")).count("1"),
             "mask_zlib_b64": base64.b64encode(zlib.compress(masks[s], 9)).decode()} for s in sorted(chosen)]


def _write_test_data(path: Path, samples: list[dict], cases: list[dict], gbnf_source: str) -> None:
    import llguidance
    used = {s["schema"] for s in samples}
    data = {"about": "States of llmchat's grammar walks where llguidance's token mask (llguidance "
                     f"{llguidance.__version__}) equals llmchat's allowed set plus the EOG ids when can_end; made "
                     f"by tools/bench/grammar_bench.py --gbnf-source {gbnf_source} --test-data. `grammars` hold the GBNF "
                     "the schema converter (llmchat's, or llama.cpp's as reference) gave at that time (kept "
                     "so the test checks the matcher and vocabulary index, not a later converter); source "
                     "llguidance:gbnf = llguidance ran that GBNF, llguidance:schema = llguidance's own JSON Schema "
                     "compiler ran the schema. mask: zlib(bitset), bit i of byte i//8 = token i.",
            "grammars": {c["name"]: c["gbnf"] for c in cases if c["name"] in used},
            "samples": samples}
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {len(samples)} agreed states to {path} ({path.stat().st_size} bytes)", file=sys.stderr)


def _summary(results: list[dict]) -> dict:
    out = {}
    for vname in sorted({r["vocab"] for r in results}):
        rows = [r for r in results if r["vocab"] == vname and "llmchat" in r and "error" not in r["llmchat"]]
        def med(get):
            vals = [v for v in (get(r) for r in rows) if v is not None]
            return _r(statistics.median(vals)) if vals else None
        def g(*keys):
            def get(r):
                node = r
                for k in keys:
                    if not isinstance(node, dict) or k not in node:
                        return None
                    node = node[k]
                return node
            return get
        out[vname] = {
            "schemas": len(rows),
            "errors": sorted(r["schema"] for r in results if r["vocab"] == vname and r not in rows),
            "median_of": "per-schema figures",
            "llmchat_compile_us": med(g("llmchat", "compile_us")),
            "llmchat_allowed_uncached_first_visit_p50_us": med(g("llmchat", "allowed_uncached_first_visit", "p50_us")),
            "llmchat_allowed_uncached_first_visit_p99_us": med(g("llmchat", "allowed_uncached_first_visit", "p99_us")),
            "llmchat_allowed_warm_automaton_uncached_p50_us": med(g("llmchat", "allowed_warm_automaton_uncached",
                                                                    "p50_us")),
            "llmchat_allowed_cached_p50_us": med(g("llmchat", "allowed_cached", "p50_us")),
            "llmchat_allowed_cached_p99_us": med(g("llmchat", "allowed_cached", "p99_us")),
            "llmchat_allows_accepted_p50_us": med(g("llmchat", "allows_accepted", "p50_us")),
            "llmchat_allows_accepted_p99_us": med(g("llmchat", "allows_accepted", "p99_us")),
            "llmchat_bitset_first_p50_us": med(g("llmchat", "bitset_first", "p50_us")),
        }
        for mode in ("gbnf", "schema"):
            k = f"llguidance_{mode}"
            out[vname].update({
                f"{k}_compile_us": med(g(k, "compile_us")),
                f"{k}_mask_p50_us": med(g(k, "mask_first_walk", "p50_us")),
                f"{k}_mask_p99_us": med(g(k, "mask_first_walk", "p99_us")),
                f"{k}_mask_second_walk_p50_us": med(g(k, "mask_second_walk", "p50_us")),
                f"{k}_states_compared": sum(g(k, "crosscheck", "states")(r) or 0 for r in rows),
                f"{k}_states_agreeing": sum(g(k, "crosscheck", "agree")(r) or 0 for r in rows),
                f"{k}_errors": sorted(r["schema"] for r in rows if "error" in r.get(k, {})),
                f"{k}_mismatched_tokens_by_class": _add_counts(g(k, "crosscheck", "by_class")(r) or {} for r in rows),
            })
    return out


def _add_counts(dicts) -> dict:
    total: dict[str, int] = {}
    for d in dicts:
        for key, n in d.items():
            total[key] = total.get(key, 0) + n
    return dict(sorted(total.items()))


def _machine() -> dict:
    import platform
    info = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        import llguidance
        info["llguidance"] = llguidance.__version__
    except ImportError:
        pass
    return info


def _print_row(row: dict) -> None:
    if "error" in row or "error" in row.get("llmchat", {}):
        print(f"{row['vocab']:8} {row['schema']:28} ERROR {row.get('error') or row['llmchat']['error']}")
        return
    o = row["llmchat"]
    parts = [f"{row['vocab']:8} {row['schema']:28} {row['doc_tokens']:4} tok | llmchat compile "
             f"{o['compile_us'] / 1000:7.2f} ms  allowed 1st {o['allowed_uncached_first_visit']['p50_us']}/"
             f"{o['allowed_uncached_first_visit']['p99_us']}  cached {o['allowed_cached']['p50_us']}/"
             f"{o['allowed_cached']['p99_us']}  allows {o['allows_accepted']['p50_us']}/"
             f"{o['allows_accepted']['p99_us']} µs"]
    for mode in ("gbnf", "schema"):
        t = row.get(f"llguidance_{mode}", {})
        if "error" in t:
            parts.append(f"llg:{mode} ERROR {t['error'][:80]}")
        elif t:
            c = t.get("crosscheck", {})
            parts.append(f"llg:{mode} compile {t['compile_us'] / 1000:6.2f} ms mask {t['mask_first_walk']['p50_us']}/"
                         f"{t['mask_first_walk']['p99_us']} µs agree {c.get('agree')}/{c.get('states')}")
    print(" | ".join(parts), flush=True)


def print_table(out: dict) -> None:
    print("\nmedians over schemas (µs unless noted; p50/p99 per walk, then the median across schemas)")
    for vname, s in out["summary"].items():
        print(f"\n[{vname}] {s['schemas']} schemas walked; errors: {s['errors'] or 'none'}")
        for k, v in s.items():
            if k not in ("schemas", "errors", "median_of"):
                print(f"  {k:52} {v}")


def print_pyodide_table(out: dict) -> None:
    print(f"llmchat on {out['vocab']}, Pyodide ({out['pyodide'].get('python')}, {out['pyodide'].get('platform')}) "
          f"vs native, p50/p99 µs")
    keys = ("allowed_uncached_first_visit", "allowed_warm_automaton_uncached", "allowed_cached", "allows_accepted",
            "bitset_first")
    for row in out["results"]:
        print(f"{row['schema']} ({row['doc_tokens']} tokens): compile {row['compile_us']['pyodide']} / "
              f"{row['compile_us']['native']} µs (pyodide / native)")
        for k in keys:
            p, n = row[k]["pyodide"], row[k]["native"]
            print(f"  {k:34} pyodide {p['p50_us']}/{p['p99_us']}   native {n['p50_us']}/{n['p99_us']}")


# ------------------------------------------------------------------------------------------------------ Pyodide
def run_inner(job_path: str, out_path: str) -> None:
    """Inside Pyodide (or natively, for the side-by-side figure): the llmchat walks of a job file."""
    from llmchat.grammar import VocabIndex
    import platform
    job = json.loads(Path(job_path).read_text())
    t0 = time.perf_counter()
    tok = load_tokenizer(Path(job["model"]))
    first, second = VocabIndex(tok), VocabIndex(tok)
    setup_s = time.perf_counter() - t0
    rows = []
    for case in job["cases"]:
        r = walk_llmchat(case["gbnf"], case["tokens"], first, second, frozenset(tok.eog_ids), keep_sets=False)
        r.pop("_sets", None)
        rows.append({"schema": case["name"], "doc_tokens": len(case["tokens"]), "llmchat": r})
    Path(out_path).write_text(json.dumps({"platform": platform.platform(), "python": platform.python_version(),
                                          "tokenizer_and_indexes_s": round(setup_s, 2), "results": rows}))


def run_pyodide(args) -> dict:
    """Walk a few schemas in Pyodide under Node (web/dist as pages get it) and natively, in one run."""
    names = args.pyodide_schemas.split(",")
    cases = [c for c in load_cases(Path(args.schemas), names, _gbnf_source(args)) if "error" not in c]
    if len(cases) != len(names):
        raise SystemExit(f"--pyodide-schemas: usable schemas {[c['name'] for c in cases]} of {names}")
    model = MODELS / VOCABS["smollm2"]
    tok = load_tokenizer(model)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    dist = ROOT / "web" / "dist" / "pyodide"
    if not (dist / "pyodide-lock.json").exists():
        raise SystemExit(f"{dist} is not built: make web")
    job = {"model": "/models/" + model.name,
           "cases": [{"name": c["name"], "gbnf": c["gbnf"], "tokens": tok.encode(c["doc"])} for c in cases]}
    (work / "job.json").write_text(json.dumps(job))
    config = {"dist": str(dist), "mounts": {"/repo": str(ROOT), "/models": str(model.parent), "/work": str(work)},
              "cwd": "/repo", "argv": ["tools/bench/grammar_bench.py", "--inner", "/work/job.json", "/work/inner_pyodide.json"]}
    (work / "config.json").write_text(json.dumps(config))
    t0 = time.perf_counter()
    proc = subprocess.run(["node", str(ROOT / "tools" / "build" / "pyodide_run.mjs"), str(work / "config.json")],
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        raise SystemExit(f"Pyodide run failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    pyo = json.loads((work / "inner_pyodide.json").read_text())
    pyo["wall_s"] = round(time.perf_counter() - t0, 1)
    native_job = dict(job, model=str(model))
    (work / "job_native.json").write_text(json.dumps(native_job))
    run_inner(str(work / "job_native.json"), str(work / "inner_native.json"))
    native = json.loads((work / "inner_native.json").read_text())
    table = []
    for p, n in zip(pyo["results"], native["results"]):
        row = {"schema": p["schema"], "doc_tokens": p["doc_tokens"]}
        for key in ("compile_us",):
            row[key] = {"pyodide": p["llmchat"][key], "native": n["llmchat"][key]}
        for key in ("allowed_uncached_first_visit", "allowed_warm_automaton_uncached", "allowed_cached",
                    "allows_accepted", "bitset_first"):
            row[key] = {side: {q: d["llmchat"][key][q] for q in ("p50_us", "p99_us")}
                        for side, d in (("pyodide", p), ("native", n))}
        table.append(row)
    return {"vocab": "smollm2", "pyodide": {k: v for k, v in pyo.items() if k != "results"},
            "native": {k: v for k, v in native.items() if k != "results"}, "results": table}


def _gbnf_source(args) -> str:
    if args.gbnf_source == "llmchat":
        return "llmchat"
    python = Path(args.llamacpp_python).expanduser()
    if not python.exists():
        raise SystemExit(f"--gbnf-source llamacpp: {python} not found")
    return str(python)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="smollm2,gemma3")
    ap.add_argument("--schemas", default=str(ROOT / "tests" / "data" / "schemas"))
    ap.add_argument("--gbnf-source", choices=("llmchat", "llamacpp"), default="llmchat",
                    help="schema -> GBNF by llmchat.grammar.json_schema, or by llama.cpp's converter "
                         "(llama-cpp-python, --llamacpp-python) as a reference")
    ap.add_argument("--llamacpp-python", default="~/.cache/llmchat-peers/llamacpp-venv/bin/python")
    ap.add_argument("--only", help="comma-separated schema names (file stems)")
    ap.add_argument("--llguidance-venv", default=str(PEER_VENV))
    ap.add_argument("--json", help="write the full results here")
    ap.add_argument("--test-data", help="write agreed states here (tests/data/grammar_crosscheck.json)")
    ap.add_argument("--samples", type=int, default=2, help="agreed states stored per schema, vocabulary and mode")
    ap.add_argument("--pyodide", action="store_true", help="llmchat's walk inside Pyodide next to native")
    ap.add_argument("--pyodide-schemas", default="openai_strict_weather,invoice,string_lengths_and_escapes")
    ap.add_argument("--workdir", default="build/grammar-bench")
    ap.add_argument("--inner", nargs=2, metavar=("JOB", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        run_inner(*args.inner)
        return
    out = run_pyodide(args) if args.pyodide else run_native(args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    if args.pyodide:
        print_pyodide_table(out)
    else:
        print_table(out)


if __name__ == "__main__":
    main()
