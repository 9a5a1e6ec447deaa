// Unit tests of web/markdown.js's parser under Node (tests/unit/test_web_markdown.py runs this file).
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseBlocks, parseInline, safeURL } from "../../web/markdown.js";

// The tree without the source spans, as plain data.
const tree = (text) => JSON.parse(JSON.stringify(parseBlocks(text), (k, v) => (k === "src" ? undefined : v)));
const inline = (text) => JSON.parse(JSON.stringify(parseInline(text)));
const t = (text) => ({ type: "text", text });

test("paragraphs, emphasis, inline code and line breaks", () => {
  assert.deepEqual(tree("a **b** *c* `d`\ne\n\nf"), [
    { type: "paragraph", inline: [t("a "), { type: "strong", children: [t("b")] }, t(" "),
      { type: "em", children: [t("c")] }, t(" "), { type: "code", text: "d" }, { type: "br" }, t("e")] },
    { type: "paragraph", inline: [t("f")] }]);
  assert.deepEqual(inline("snake_case_name and 2 * 3 * 4"), [t("snake_case_name and 2 * 3 * 4")]);
  assert.deepEqual(inline("`a*b*` \\*x\\*"), [{ type: "code", text: "a*b*" }, t(" *x*")]);
  assert.deepEqual(inline("~~gone~~ __s__ _e_"), [{ type: "del", children: [t("gone")] }, t(" "),
    { type: "strong", children: [t("s")] }, t(" "), { type: "em", children: [t("e")] }]);
  assert.deepEqual(inline("**unclosed"), [t("**unclosed")]);
});

test("lists: bullets, numbers, nesting, loose items", () => {
  const [list, numbered] = tree("- one\n- two\n  - nested\n- three\n\n3. a\n4. b");
  assert.equal(list.type, "list");
  assert.equal(list.ordered, false);
  assert.equal(list.loose, false);
  assert.equal(list.items.length, 3);
  assert.equal(list.items[1][1].type, "list");
  assert.deepEqual(list.items[1][1].items, [[{ type: "paragraph", inline: [t("nested")] }]]);
  assert.equal(numbered.ordered, true);
  assert.equal(numbered.start, 3);
  assert.equal(numbered.items.length, 2);
  assert.equal(tree("- a\n\n- b")[0].loose, true);
});

test("fenced code keeps its text verbatim, closed or still streaming", () => {
  assert.deepEqual(tree("```js\nconst x = '<b>' * 2;\n\n**no**\n```\nafter"), [
    { type: "code", lang: "js", text: "const x = '<b>' * 2;\n\n**no**", closed: true },
    { type: "paragraph", inline: [t("after")] }]);
  assert.deepEqual(tree("~~~\npartial"), [{ type: "code", lang: "", text: "partial", closed: false }]);
});

test("tables with alignment and ragged rows", () => {
  const [table] = tree("| a | b | c |\n|:--|:-:|--:|\n| 1 | `2` | x \\| y |\n| only |");
  assert.equal(table.type, "table");
  assert.deepEqual(table.align, ["left", "center", "right"]);
  assert.deepEqual(table.head, [[t("a")], [t("b")], [t("c")]]);
  assert.deepEqual(table.rows[0], [[t("1")], [{ type: "code", text: "2" }], [t("x | y")]]);
  assert.deepEqual(table.rows[1], [[t("only")], [], []]);
});

test("headings, quotes, rules", () => {
  assert.deepEqual(tree("## Title ##\n> quoted *x*\n\n---"), [
    { type: "heading", level: 2, inline: [t("Title")] },
    { type: "quote", blocks: [{ type: "paragraph", inline: [t("quoted "), { type: "em", children: [t("x")] }] }] },
    { type: "rule" }]);
});

test("links only for http(s); everything else stays text", () => {
  assert.deepEqual(inline("[ok](https://e.org/a_(b)) [bad](javascript:alert(1)) [rel](/x)"), [
    { type: "link", href: "https://e.org/a_(b)", children: [t("ok")] },
    t(" [bad](javascript:alert(1)) [rel](/x)")]);
  assert.deepEqual(inline("see https://e.org/x. or <http://e.org/y>"), [t("see "),
    { type: "link", href: "https://e.org/x", children: [t("https://e.org/x")] }, t(". or "),
    { type: "link", href: "http://e.org/y", children: [t("http://e.org/y")] }]);
  assert.deepEqual(inline("[x](JaVaScRiPt:alert(1)) [y](data:text/html,<script>)"),
    [t("[x](JaVaScRiPt:alert(1)) [y](data:text/html,<script>)")]);
  assert.equal(safeURL(" javascript:alert(1)"), null);
  assert.equal(safeURL("https://e.org/"), "https://e.org/");
  assert.equal(safeURL("http://"), null);
});

test("images become links (never loaded); raw HTML is text", () => {
  assert.deepEqual(inline("![cat](https://e.org/c.png) ![x](javascript:1)"), [
    { type: "link", href: "https://e.org/c.png", image: true, children: [t("cat")] }, t(" ![x](javascript:1)")]);
  assert.deepEqual(tree("<script>alert(1)</script>\n<img src=x onerror=alert(1)>"), [
    { type: "paragraph", inline: [t("<script>alert(1)</script>"), { type: "br" }, t("<img src=x onerror=alert(1)>")] }]);
});

test("source spans: a growing reply changes only its last block", () => {
  const a = parseBlocks("# T\n\npara one\n\n- x\n- y");
  const b = parseBlocks("# T\n\npara one\n\n- x\n- y\n- z");
  assert.deepEqual(a.slice(0, 2).map((x) => x.src), b.slice(0, 2).map((x) => x.src));
  assert.notEqual(a[2].src, b[2].src);
});
