"""Grammar-constrained decoding: GBNF grammars matched over bytes, and the vocabulary tokens they allow.

    grammar = Grammar.parse(gbnf_text, special={"<|im_end|>": 2})     # compiled once, cached by text
    index = VocabIndex.for_tokenizer(tokenizer)                       # once per vocabulary
    m = grammar.matcher()                                             # one per sequence
    mask = index.allowed(m).bitset()      # or index.allows(m, token) for a few candidates
    index.advance(m, sampled_token)       # EOS/EOG: allowed iff m.can_end

Design (pure Python, standard library only: it runs in Pyodide).

- Symbols are bytes, not characters: a character class compiles to the UTF-8 byte-range sequences of its
  characters (utf8.py), so tokens that end inside a character need no special case, and a token is just its
  bytes. Special tokens are symbols 256 + id, matched only where the grammar names them.
- The matcher is llama.cpp's pushdown recogniser (a set of parse stacks, each a tuple of grammar positions) with
  two changes that make it fast in Python. Every distinct set of stacks is interned once per grammar as a
  `State`, and a state's transition on a byte is computed once and then kept, so the pushdown machine unfolds
  lazily into a DFA over the states a workload actually visits; advancing by a byte is then one list lookup
  (~0.1 us), `allows` a few lookups, `clone` a pointer copy, and the state's stack set is the cache key.
  Rule references followed by the end of their alternative push nothing (tail calls), so `x*` does not grow
  the stacks. Left recursion and grammars that match nothing are refused when compiling; more than MAX_STACKS
  simultaneous parses raises GrammarError instead of hanging.
- `VocabIndex.allowed` walks a byte trie of the vocabulary (flat arrays in preorder, so a rejected byte skips its
  whole subtree by one index jump) against the state, caching the result per (grammar, state). What a state
  allows at a new nesting depth mostly does not depend on the depth: the walk runs on the state *relative* to
  the stack entries all its parses share at the bottom, marks the subtrees where some parse would pop into that
  shared part as undecided, and only those few tokens are checked against the full state (the idea behind
  xgrammar's context-independent tokens, applied per state instead of per grammar position). Where the state
  takes any text and returns to itself (string contents), trie subtrees of plain well-formed UTF-8 are allowed
  whole without being walked.

Costs measured by tools/bench/grammar_bench.py (JSON grammar, a ~320-token document, CPython 3.11 on this machine's
CPU): the first walk of a state costs at most ~5 ms on SmolLM2's 49k vocabulary (p50 2.6 ms) and ~27 ms on Gemma
3's 262k (p50 1 ms); a state at a new nesting depth whose relative state was seen before costs p50 0.02 / 0.12 ms
(p99 0.3 / 0.6 ms); a cached state ~1 us; `allows` ~1 us; the GPU bitset at most 0.09 ms (packed with big-int
shifts, not a loop); compiling the JSON grammar ~1 ms; building the index 0.3 s / 1.4 s.
"""
from .constraint import Constraint
from .grammar import Grammar
from .json_schema import JSON_GBNF, SchemaRules, json_object_gbnf, schema_to_gbnf
from .matcher import Matcher
from .regex import literal, regex_to_gbnf
from .vocab import AllowedSet, VocabIndex

__all__ = ["JSON_GBNF", "AllowedSet", "Constraint", "Grammar", "Matcher", "SchemaRules", "VocabIndex",
           "json_object_gbnf", "literal", "regex_to_gbnf", "schema_to_gbnf"]
