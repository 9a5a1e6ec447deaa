"""The tokenizer test corpus: several hundred strings that exercise what breaks tokenizers.

Markup (HTML, Markdown, JSON, XML), code in several languages, runs of spaces, tabs and newlines of many lengths,
text that looks like special tokens (whole, partial, nested), emoji sequences, many scripts and mixes of them,
numbers in many notations, the empty string and single characters, and seeded random strings (ASCII, mixed
fragments, and code points from the whole Unicode range). Deterministic: the same list on every run and Python
version (it uses only `random.Random(seed)` integer draws and `choice`).

    python tools/reference/tokenizer_corpus.py          # prints the corpus as JSON, with counts per part on stderr

`corpus()` gives `{part: [strings]}`; `special_subset()` the strings also tokenized with special-token parsing.
"""
from __future__ import annotations

import json
import random
import sys

SEED = 20261130

MARKUP = [
    "<html><head><title>Test page</title></head><body><p>Hello</p></body></html>",
    '<div class="chat"><span id="a1">first</span> <span>second</span></div>',
    "<table>\n  <tr><th>Name</th><th>Age</th></tr>\n  <tr><td>Ann</td><td>31</td></tr>\n</table>",
    "<h1>Title</h1>\n<h2>Subtitle</h2>\n<blockquote>quoted</blockquote>",
    "<b>bold</b> <i>italic</i> <u>under</u> <s>strike</s> <sub>2</sub> <sup>3</sup> <code>x=1</code>",
    "<ul>\n<li>one</li>\n<li>two</li>\n</ul>",
    '<a href="https://example.com/?q=1&amp;r=2">link</a><img src="x.png" alt="">',
    "<!-- a comment --><br/><hr /><input type='text' value=\"v\">",
    "&lt;tag&gt; &amp; &quot;quoted&quot; &#39;apos&#39; &nbsp; &#x1F600;",
    '<?xml version="1.0" encoding="UTF-8"?>\n<root><item key="a">1</item><item key="b"/></root>',
    "<svg width='10' height='10'><circle cx='5' cy='5' r='4'/></svg>",
    "<script>const x = a < b && c > d;</script><style>p { color: red; }</style>",
    "<table><caption>c</caption><thead><tr><th>h</th></tr></thead><tbody><tr><td>d</td></tr></tbody>"
    "<tfoot><tr><td>f</td></tr></tfoot></table>",
    "<div><div><div>deep</div></div></div><iframe src=x></iframe><footer>end</footer>",
    "<strong>strong</strong><em>em</em><span>span</span><bbox>1,2,3,4</bbox>",
    "# Heading 1\n\n## Heading 2\n\nSome *emphasis*, **strong**, ~~strike~~ and `code`.",
    "- item one\n- item two\n  - nested item\n1. first\n2. second",
    "```python\nprint('hi')\n```\n\n```\nplain block\n```",
    "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |",
    "> quote line one\n> quote line two\n\n---\n\n[link](https://example.org) ![img](a.png)",
    "Term\n: Definition\n\n* [ ] todo\n* [x] done",
    '{"name": "Ann", "age": 31, "tags": ["a", "b"], "nested": {"ok": true, "none": null}}',
    '{\n  "key": "value",\n  "list": [\n    1,\n    2.5,\n    -3e10\n  ]\n}',
    '[{"id":1},{"id":2},{"id":3}]',
    '{"unicode": "\\u00e9\\u4e2d", "escaped": "line\\nbreak\\t\\"quote\\""}',
    '{"emoji": "😀", "cjk": "中文", "empty": "", "zero": 0}',
    "key: value\nlist:\n  - a\n  - b\nnested:\n  inner: 1\n",
    "[section]\nname = \"x\"\nvalue = 42\n",
    "a,b,c\n1,2,3\n\"quoted, comma\",4,5\n",
]

CODE = [
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    a, b = 0, 1\n    for _ in range(n):\n'
    "        a, b = b, a + b\n    return a\n",
    "class Point:\n\tdef __init__(self, x, y):\n\t\tself.x = x\n\t\tself.y = y\n",
    "import numpy as np\nx = np.arange(10) ** 2  # squares\nprint(f\"{x.sum():,}\")\n",
    "async def main() -> None:\n    async with session.get(url) as r:\n        data = await r.json()\n",
    "lambda x, *args, **kwargs: (x, args, kwargs)",
    "function add(a, b) {\n  return a + b;\n}\nconst arrow = (x) => x * 2;\n",
    "const { a, b } = obj ?? {};\nlet s = `template ${a + b} literal`;\nconsole.log(s);",
    "#include <stdio.h>\n\nint main(void) {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
    "impl<T: Clone> Stack<T> {\n    pub fn push(&mut self, item: T) { self.items.push(item); }\n}\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n",
    "public static void main(String[] args) {\n        System.out.println(\"Hi\");\n    }",
    "SELECT name, COUNT(*) AS n FROM users WHERE age >= 18 GROUP BY name ORDER BY n DESC;",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\"; done | sort -u > out.log 2>&1\n",
    "body { margin: 0; padding: 0 1em; }\n.a > .b:hover::after { content: '→'; }",
    "x <- c(1, 2, 3)\nmean(x)\n",
    "(defun square (x) (* x x))",
    "main :: IO ()\nmain = putStrLn \"hello\" >> return ()",
    "if x == 1:\n    pass\nelif x != 2:\n    raise ValueError('bad')\nelse:\n    x += 1\n",
    "a = [i for i in range(10) if i % 2 == 0]\nb = {k: v for k, v in zip(a, a)}",
    "    indented four\n        indented eight\n            indented twelve\n",
    "\tone tab\n\t\ttwo tabs\n\t\t\tthree tabs\n",
    "x=1;y=2;z=x+y;print(z)",
    "// comment\n/* block\n   comment */\n# hash comment\n-- sql comment",
    "0x1F 0b1010 0o777 1_000_000 3.14e-10 -0.0 +1",
    "a->b; c::d; e=>f; g|>h; i<=j; k>=l; m!=n; o==p; q&&r; s||t",
    "$var @array %hash &sub *glob ~tilde ^caret `backtick`",
    "\\begin{equation}\n  E = mc^2 \\quad \\frac{a}{b}\n\\end{equation}",
    "regex: ^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$",
]

SPECIAL_LOOKING = [
    "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]",
    "<unused0>", "<unused42>", "<unused98>", "<start_of_image>", "<end_of_image>",
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\nWrite a poem.<end_of_turn>\n<start_of_turn>model\nRoses are red<end_of_turn>",
    "<start_of", "start_of_turn>", "<start_of_turn", "start_of_turn", "<end_of_turn><end_of_turn>",
    "<<bos>>", "<bos><bos>", "<bo s>", "< bos>", "<BOS>", "<eos", "eos>", "<eos>>",
    "<s>", "</s>", "<s>[INST] text [/INST]</s>", "]</s>", "x</s>y", "<|im_start|>", "<|im_end|>",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "<|eot_id|>",
    "<|start_header_id|>user<|end_header_id|>", "<think>reasoning</think>", "<tool_call>{}</tool_call>",
    "text<start_of_turn>text", "  <start_of_turn>  ", "\n<end_of_turn>\n", "<unused>", "<unused-1>",
    "<start_of_turn>model", "<start_of_turn>user<start_of_turn>user", "<<start_of_turn>>", "<pad><pad><pad>",
    "[multimodal][multimodal]", "<mask>ed", "un<unk>known",
]

WHITESPACE = (
    [" " * n for n in (1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 40, 64)]
    + ["\t" * n for n in (1, 2, 3, 5, 8, 16, 31, 32, 35)]
    + ["\n" * n for n in (1, 2, 3, 4, 6, 10, 16, 31, 32, 33, 40)]
    + ["\r\n" * n for n in (1, 2, 5)]
    + ["\r", "\r\r", "\v", "\f", "\x85", "\u2028", "\u2029", "\xa0", "\u3000", "\u2009", "\u200b", "\ufeff"]
    + [" \n", "\n ", " \n ", "\t\n", "\n\t", " \t ", "\t \t", "  \n\n  ", "\n \n \n", " \t\n\r\v\f"]
    + ["word" + " " * n + "word" for n in (2, 3, 5, 9, 20, 33)]
    + ["word" + "\t" * n + "word" for n in (1, 2, 4, 33)]
    + ["word" + "\n" * n + "word" for n in (1, 2, 3, 7, 32, 33)]
    + ["  leading", "trailing  ", "   both   ", "\tx\t", "\nx\n", " x", "x ", " x ", "a b  c   d    e"]
    + ["line one\r\nline two\rline three\n", "para one\n\npara two\n\n\npara three"]
)

EMOJI = [
    "😀", "👍", "👍🏽", "🇫🇷", "🇯🇵🇺🇸", "👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "❤️", "#️⃣", "1️⃣",
    "🧑🏿\u200d💻", "🫠🫡🫶", "😀😃😄😁😆😅😂🤣", "I ❤️ NY 🗽", "emoji 😀 inside 🐍 text 🚀!", "☕️", "✅❌⚠️",
    "🦙.cpp", "🐈\u200d⬛", "👩🏻\u200d🤝\u200d👨🏾",
]

SCRIPTS = [
    "日本語のテキストです。", "東京は日本の首都です。ひらがな、カタカナ、漢字。", "ｶﾀｶﾅ 半角", "中文分词测试：你好，世界！",
    "人工智能正在改变世界。", "繁體中文：臺灣、香港。", "한국어 문장입니다", "안녕하세요, 세계!",
    "العربية من اليمين إلى اليسار", "مرحبا بالعالم ١٢٣", "עברית: שלום עולם", "हिन्दी में एक वाक्य।",
    "नमस्ते दुनिया", "বাংলা ভাষা", "தமிழ் மொழி", "తెలుగు", "ภาษาไทยไม่มีช่องว่าง", "ພາສາລາວ", "ខ្មែរ",
    "Русский текст с ёжиком", "Привет, мир!", "Українська мова: ґ, є, і, ї", "Ελληνικά: γειά σου κόσμε",
    "Հայերեն", "ქართული", "አማርኛ", "ᏣᎳᎩ", "Tiếng Việt có dấu", "Türkçe: ığüşöç İĞÜŞÖÇ", "Polski: zażółć gęślą jaźń",
    "Deutsch: Äpfel, Öl, Übermaß, Straße", "Français : « guillemets » — tiret", "naïve café résumé coöperate",
    "Ünïcödé ÀÉÎÕÜ ß ſ", "e\u0301 combining vs é precomposed", "a\u0300\u0301\u0302\u0303 stacked marks",
    "Mixed 中文 and English with 123 numbers", "English日本語English", "Русский and English вместе",
    "مرحبا hello שלום", "ABC한국어abc", "x日y本z", "Ａｂｃ　全角", "ℌ𝔢𝔩𝔩𝔬 𝕎𝕠𝕣𝕝𝕕", "𝐁𝐨𝐥𝐝 𝑰𝒕𝒂𝒍𝒊𝒄",
    "∑ x² ≤ ∞ → ∫ f(x) dx", "α + β = γ; Δx ≈ 0.1", "© ® ™ § ¶ † ‡ • …", "€100 £50 ¥1000 ₹500 ₿1",
    "𠀀𠀁 extension B", "\U000e0041\U000e0042 tags", "\ue000\uf8ff private use",
]

NUMBERS = [
    "0", "1", "12", "123", "1234", "12345", "123456789", "1234567890123456789012345678901234567890",
    "3.14159", "-42", "+7", "1e10", "6.022e23", "1,000,000", "1.000.000,50", "1 000 000", "0.000001",
    "2026-11-29T14:07:15Z", "12:30:45.123", "+1 (555) 123-4567", "192.168.0.1", "v1.2.3-rc.4",
    "numbers: 1 12 123 1234 12345 3.14 -7 1e10 0xFF 1,000,000", "50%", "3/4", "½ ¼ ¾", "x² y³",
    "XIV MMXXVI", "Ⅻ ⅷ", "١٢٣٤٥", "०१२३४", "１２３", "𝟏𝟐𝟑", "100km/h", "$1,234.56", "-0.5e-3",
]

EDGE = ["", "a", "A", "z", ".", ",", "!", "?", "'", '"', "-", "_", "~", "`", "<", ">", "&", "#", "@", "\\",
        "\x00", "\x01", "\x1f", "\x7f", "é", "ß", "日", "한", "ا", "ह", "ж", "😀", "\u0301", "\ufffd",
        "ab", "aa", "aaa", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "supercalifragilisticexpialidocious", "Hello world", " Hello world", "Hello, world!", "HELLO",
        "I'm sure you're right; it's what we'd've done.", "DON'T SHOUT", "snake_case camelCase PascalCase",
        "https://example.com/path?q=1&r=2#frag", "user@example.org", "C:\\Users\\name\\file.txt", "/usr/bin/env"]

# Pieces the mixed random strings are assembled from.
_FRAGMENTS = ["the", " the", "The", "ing", " ", "  ", "\t", "\n", "\n\n", "<b>", "</b>", "<td>", "<s>", "</s>",
              "<start_of_turn>", "<end_of_turn>", "<bos>", "<", ">", "/", "▁", "▁▁", "日本", "한국", "😀", "👍🏽",
              "é", "e\u0301", "123", "4", ".", ",", "'s", "'", "\"", "{", "}", "(", ")", "[", "]", "=", "->",
              "ا", "ह", "ж", "Ω", "\u200d", "\xa0", "\u3000", "#", "*", "-", "_", "0x", "\r\n", "    ", "a", "Z"]
_RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
           (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x23FF), (0x3000, 0x30FF),
           (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1F6FF), (0x1F900, 0x1F9FF),
           (0x10000, 0x1007F), (0x20000, 0x2A6DF)]


def _random_ascii(rng: random.Random, n: int) -> list[str]:
    alphabet = "".join(map(chr, range(0x20, 0x7F))) + "\t\n"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def _random_words(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(n):
        words = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 12))) for _ in range(rng.randint(1, 12))]
        out.append(" ".join(w.capitalize() if rng.randint(0, 4) == 0 else w for w in words))
    return out


def _random_fragments(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(1, 16))) for _ in range(n)]


def _random_code_points(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(1, 24)):
            lo, hi = rng.choice(_RANGES)
            chars.append(chr(rng.randint(lo, hi)))
        out.append("".join(chars))
    return out


def _random_any(rng: random.Random, n: int) -> list[str]:
    """Code points from anywhere in Unicode except surrogates (which UTF-8 cannot carry)."""
    out = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(1, 12)):
            cp = rng.randint(0, 0x10FFFF)
            while 0xD800 <= cp <= 0xDFFF:
                cp = rng.randint(0, 0x10FFFF)
            chars.append(chr(cp))
        out.append("".join(chars))
    return out


def corpus() -> dict[str, list[str]]:
    rng = random.Random(SEED)
    return {
        "markup": MARKUP,
        "code": CODE,
        "special_looking": SPECIAL_LOOKING,
        "whitespace": WHITESPACE,
        "emoji": EMOJI,
        "scripts": SCRIPTS,
        "numbers": NUMBERS,
        "edge": EDGE,
        "random_ascii": _random_ascii(rng, 60),
        "random_words": _random_words(rng, 40),
        "random_fragments": _random_fragments(rng, 80),
        "random_code_points": _random_code_points(rng, 60),
        "random_any": _random_any(rng, 30),
    }


def special_subset() -> list[str]:
    """Strings also tokenized with special-token parsing on: the special-looking ones, a sample of the others."""
    parts = corpus()
    return [*parts["special_looking"], *parts["markup"][:8], *parts["whitespace"][:10], *parts["edge"][:10],
            *parts["random_fragments"][:30]]


if __name__ == "__main__":
    parts = corpus()
    for name, strings in parts.items():
        print(f"{name:20} {len(strings)}", file=sys.stderr)
    print(f"{'total':20} {sum(map(len, parts.values()))}, special subset {len(special_subset())}", file=sys.stderr)
    json.dump(parts, sys.stdout, ensure_ascii=False, indent=1)
