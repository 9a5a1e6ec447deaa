"""Ask llama.cpp (through llama-cpp-python) how it treats a set of GBNF grammars; write tests/data/grammar_llamacpp.json.

    ~/.cache/llmchat-peers/llamacpp-venv/bin/python tools/reference/grammar_llamacpp_oracle.py SmolLM2-135M-Instruct.Q4_1.gguf

For each grammar: whether llama.cpp's parser accepts it. For a few grammars and token sequences (SmolLM2's
vocabulary): after llama.cpp's grammar sampler has accepted each prefix of the sequence, which tokens it leaves
allowed (logit not -inf), stored as id ranges. tests/model/test_grammar_llamacpp.py compares llmchat.grammar against
this file; it never runs llama.cpp itself.
"""
from __future__ import annotations

import ctypes
import json
import math
import subprocess
import sys
from pathlib import Path

import llama_cpp as lc

OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "grammar_llamacpp.json"

# (name, grammar). Our parser is meant to agree on all of these except where the test data notes a difference.
PARSE_CASES = [
    ("simple", 'root ::= "a" | "b"\n'),
    ("classes", 'root ::= [a-z0-9_] [^"\\\\] [\\x41-\\x5A] [\\u00e0-\\u00ff]\n'),
    ("repetition", 'root ::= "a"{2,3} "b"{2} "c"{1,} "d"* "e"+ "f"?\n'),
    ("groups_multiline", 'root ::= (\n  "a" |\n  "b"\n) c\nc ::=\n  "c"\n'),
    ("comments", '# top\nroot ::= x # after\n# between\nx ::= "x"\n'),
    ("any_char", 'root ::= . "." .\n'),
    ("escapes", 'root ::= "\\x41\\u00e9\\U0001F600\\t\\n\\r\\\\\\"\\[\\]\\-"\n'),
    ("empty_alternative", 'root ::= "a" |\n'),
    ("empty_literal", 'root ::= ""\n'),
    ("token_id", 'root ::= "a" <[2]>\n'),
    ("token_text", 'root ::= "a" <|im_end|>\n'),
    ("repeat_of_repeat", 'root ::= "a"+?\n'),
    ("dash_in_class", 'root ::= [-a] [a-] [a\\-z]\n'),
    ("undefined_rule", 'root ::= foo\n'),
    ("missing_root", 'item ::= "a"\n'),
    ("bad_escape", 'root ::= "\\q"\n'),
    ("short_hex", 'root ::= "\\x4"\n'),
    ("unterminated_literal", 'root ::= "abc\n'),
    ("unterminated_class", 'root ::= [abc\n'),
    ("unclosed_group", 'root ::= ("a"\n'),
    ("stray_paren", 'root ::= "a" ) "b"\n'),
    ("no_assign", 'root "a"\n'),
    ("leading_pipe_line", 'root ::= "a"\n  | "b"\n'),
    ("repeat_nothing", 'root ::= * "a"\n'),
    ("bad_braces", 'root ::= "a"{2\n'),
    ("left_recursion", 'root ::= expr\nexpr ::= expr "+" "1" | "1"\n'),
    ("indirect_left_recursion", 'root ::= a\na ::= b "x" | "y"\nb ::= "z"? a\n'),
    ("underscore_name", 'root ::= my_rule\nmy_rule ::= "a"\n'),
    ("duplicate_rule", 'root ::= "a"\nroot ::= "b"\n'),
    ("never_completes", 'root ::= "a" root\n'),
    ("empty_class", 'root ::= []\n'),
    ("reversed_range", 'root ::= [z-a]\n'),
    ("max_below_min", 'root ::= "a"{3,1}\n'),
    ("negated_token", 'root ::= !<[2]>\n'),
]

JSONISH = r'''
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,4})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
'''

# (name, grammar, text whose tokens are walked): allowed sets are recorded before each token.
WALKS = [
    ("json", JSONISH, '{"name": "Ada", "n": [1, -2.5e3, true], "o": {"k": "caf\u00e9 \\"x\\""}}'),
    ("utf8_classes", 'root ::= [^a-z\\u00e9]+ "!" | [\\u4e00-\\u9fff]{1,3}\n', "\u6570\u5b66"),
    ("words", 'root ::= ("hello" | "help" | "world") (" " ("hello" | "world"))*\n', "hello world hello"),
]


def _quiet() -> None:
    @ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
    def log(level, text, data):  # llama.cpp prints every parse error in full; keep the output readable
        pass
    _quiet.log = log  # type: ignore[attr-defined]  # keep the callback alive
    lc.llama_log_set(log, ctypes.c_void_p())


def main() -> None:
    model_path = sys.argv[1]
    lc.llama_backend_init()
    _quiet()
    params = lc.llama_model_default_params()
    params.vocab_only = True
    model = lc.llama_model_load_from_file(model_path.encode(), params)
    vocab = lc.llama_model_get_vocab(model)
    n_vocab = lc.llama_vocab_n_tokens(vocab)

    def sampler(text: str):
        return lc.llama_sampler_init_grammar(vocab, text.encode(), b"root")

    parse = {}
    for name, text in PARSE_CASES:
        parse[name] = {"grammar": text, "llama_cpp": _parse_in_child(model_path, text)}

    data = (lc.llama_token_data * n_vocab)()
    walks = []
    for name, text, doc in WALKS:
        buf = (lc.llama_token * (len(doc) * 4 + 8))()
        n = lc.llama_tokenize(vocab, doc.encode(), len(doc.encode()), buf, len(buf), False, False)
        ids = list(buf[:n])
        states = []
        for k in range(len(ids) + 1):
            smpl = sampler(text)
            for tid in ids[:k]:
                lc.llama_sampler_accept(smpl, tid)
            for i in range(n_vocab):
                data[i].id, data[i].logit, data[i].p = i, 0.0, 0.0
            arr = lc.llama_token_data_array(data, n_vocab, -1, False)
            lc.llama_sampler_apply(smpl, ctypes.byref(arr))
            allowed = [data[i].id for i in range(n_vocab) if not math.isinf(data[i].logit)]
            states.append({"prefix": ids[:k], "allowed_ranges": _ranges(sorted(allowed))})
            lc.llama_sampler_free(smpl)
        walks.append({"name": name, "grammar": text, "text": doc, "tokens": ids, "states": states})
    OUT.write_text(json.dumps({"llama_cpp_python": lc.__version__, "vocabulary": Path(model_path).name,
                               "parse": parse, "walks": walks}, separators=(",", ":")) + "\n")
    print(f"wrote {OUT}: {len(parse)} grammars, {sum(len(w['states']) for w in walks)} states")


def _parse_in_child(model_path: str, text: str) -> str:
    """"accepts", "refuses", or how it failed: some grammars make llama.cpp hang or exhaust memory, so each runs
    in its own process with a memory and time limit."""
    code = ("import sys, resource, llama_cpp as lc\n"
            "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
            "lc.llama_backend_init(); p = lc.llama_model_default_params(); p.vocab_only = True\n"
            "m = lc.llama_model_load_from_file(sys.argv[1].encode(), p)\n"
            "s = lc.llama_sampler_init_grammar(lc.llama_model_get_vocab(m), sys.argv[2].encode(), b'root')\n"
            "print('accepts' if s else 'refuses')\n")
    try:
        run = subprocess.run([sys.executable, "-c", code, model_path, text], capture_output=True, text=True,
                             timeout=60)
    except subprocess.TimeoutExpired:
        return "hangs"
    out = run.stdout.strip().splitlines()
    return out[-1] if run.returncode == 0 and out else f"crashes (exit {run.returncode})"


def _ranges(ids: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for i in ids:
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


if __name__ == "__main__":
    main()
