// Markdown of chat replies, as chat users expect it, built as DOM nodes: model text never reaches innerHTML.
//
//   parseBlocks(text) → blocks, each {type, src, ...}: paragraph, heading, list, code, table, quote, rule
//   parseInline(text) → inline nodes: text, code, strong, em, del, link, br
//   new MarkdownView(container, {copy}).update(text)   renders into `container`, keeping unchanged blocks
//
// What is deliberately left out: raw HTML is shown as the text it is; links are made only for http(s) URLs (others
// stay text); images are never loaded (an image becomes a link to it, so nothing is fetched unless clicked).
// The parser is pure (no DOM) so that it runs under Node for its unit tests.

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const ITEM = /^( {0,6})([-*+]|\d{1,9}[.)])(\s+|$)(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

// Blocks of `text`. Each keeps `src`, the lines it came from: while a reply streams, only blocks whose source
// changed are rendered again.
export function parseBlocks(text) {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    const start = i;
    const fence = FENCE.exec(line);
    let block;
    if (fence) {
      const close = new RegExp(`^ {0,3}${fence[1][0] === "`" ? "`" : "~"}{${fence[1].length},}\\s*$`);
      const body = [];
      i++;
      let closed = false;
      while (i < lines.length) {
        if (close.test(lines[i])) {
          closed = true;
          i++;
          break;
        }
        body.push(lines[i++]);
      }
      block = { type: "code", lang: fence[2], text: body.join("\n"), closed };
    } else if (HEADING.test(line)) {
      const m = HEADING.exec(line);
      block = { type: "heading", level: m[1].length, inline: parseInline(m[2]) };
      i++;
    } else if (RULE.test(line)) {
      block = { type: "rule" };
      i++;
    } else if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && lines[i].trim() && QUOTE.test(lines[i])) inner.push(QUOTE.exec(lines[i++])[1]);
      block = { type: "quote", blocks: parseBlocks(inner.join("\n")) };
    } else if (ITEM.test(line)) {
      [block, i] = parseList(lines, i);
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) &&
               lines[i + 1].includes("-")) {
      const head = cells(line);
      const align = cells(lines[i + 1]).map((c) => (c.startsWith(":") && c.endsWith(":") ? "center" :
        c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : ""));
      i += 2;
      const rows = [];
      while (i < lines.length && lines[i].trim() && lines[i].includes("|")) rows.push(cells(lines[i++]));
      const width = head.length;
      block = { type: "table", align: align.slice(0, width),
        head: head.map(parseInline),
        rows: rows.map((r) => Array.from({ length: width }, (_, k) => parseInline(r[k] ?? ""))) };
    } else {
      const body = [];
      while (i < lines.length && lines[i].trim() && !(body.length && startsBlock(lines, i))) body.push(lines[i++]);
      block = { type: "paragraph", inline: parseInline(body.map((l) => l.trim()).join("\n")) };
    }
    block.src = lines.slice(start, i).join("\n");
    blocks.push(block);
  }
  return blocks;
}

function startsBlock(lines, i) {
  const line = lines[i];
  return FENCE.test(line) || HEADING.test(line) || QUOTE.test(line) || RULE.test(line) ||
    /^ {0,3}([-*+]|1[.)])\s+\S/.test(line);
}

// A list: items start with a marker; lines indented under an item (or after a blank line, indented) belong to it.
function parseList(lines, i) {
  const first = ITEM.exec(lines[i]);
  const ordered = /\d/.test(first[2]);
  const indent = first[1].length;
  const items = [];
  let loose = false;
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const body = [m[4]];
    const inner = indent + m[2].length + Math.max(1, Math.min(4, m[3].length));
    i++;
    while (i < lines.length) {
      const line = lines[i];
      if (!line.trim()) {
        // A blank line continues the item only when an indented line follows it.
        const next = lines[i + 1];
        if (next !== undefined && next.trim() && leading(next) >= inner) {
          body.push("");
          loose = true;
          i++;
          continue;
        }
        break;
      }
      const other = ITEM.exec(line);
      if (other && other[1].length <= indent) break;
      if (leading(line) < inner && !other && (FENCE.test(line) || HEADING.test(line) || QUOTE.test(line))) break;
      body.push(line.slice(Math.min(leading(line), inner)));
      i++;
    }
    items.push(parseBlocks(body.join("\n")));
    // Items separated by a blank line make a loose list.
    const next = ITEM.exec(lines[i + 1] ?? "");
    if (i < lines.length && !lines[i].trim() && next && next[1].length === indent &&
        /\d/.test(next[2]) === ordered) {
      loose = true;
      i++;
    }
  }
  const start = ordered ? Number.parseInt(first[2], 10) : 1;
  return [{ type: "list", ordered, start, loose, items }, i];
}

function leading(line) {
  return line.length - line.trimStart().length;
}

function cells(line) {
  let text = line.trim();
  if (text.startsWith("|")) text = text.slice(1);
  if (text.endsWith("|") && !text.endsWith("\\|")) text = text.slice(0, -1);
  const out = [];
  let cell = "";
  for (let k = 0; k < text.length; k++) {
    if (text[k] === "\\" && text[k + 1] === "|") {
      cell += "|";
      k++;
    } else if (text[k] === "|") {
      out.push(cell.trim());
      cell = "";
    } else cell += text[k];
  }
  out.push(cell.trim());
  return out;
}

const PUNCT = /[!-/:-@[-`{-~]/;
const BARE_URL = /^https?:\/\/[^\s<>]*[^\s<>.,;:!?'")\]*_~]/i;

// http(s) URLs only, as the browser would resolve them; anything else (javascript:, data:, relative) is refused.
export function safeURL(raw) {
  const text = raw.trim().replace(/^<(.*)>$/, "$1");
  if (!/^https?:\/\//i.test(text)) return null;
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

export function parseInline(text) {
  const out = [];
  let plain = "";
  const flush = () => {
    if (plain) out.push({ type: "text", text: plain });
    plain = "";
  };
  const push = (node) => {
    flush();
    out.push(node);
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const rest = text.slice(i);
    if (c === "\\" && PUNCT.test(text[i + 1] ?? "")) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "\n") {
      push({ type: "br" });
      i++;
      continue;
    }
    if (c === "`") {
      const run = /^`+/.exec(rest)[0];
      const end = text.indexOf(run, i + run.length);
      if (end > 0) {
        let code = text.slice(i + run.length, end).replace(/\n/g, " ");
        if (/^ .*[^ ].* $/.test(code)) code = code.slice(1, -1);
        push({ type: "code", text: code });
        i = end + run.length;
        continue;
      }
      plain += run;
      i += run.length;
      continue;
    }
    if (c === "!" && text[i + 1] === "[") {
      const link = linkAt(text, i + 1);
      if (link) {
        // An image is never loaded: it becomes a link to the picture (or its text, when the URL is not http(s)).
        const href = safeURL(link.url);
        if (href) push({ type: "link", href, image: true, children: [{ type: "text", text: link.label || href }] });
        else plain += text.slice(i, link.end);
        i = link.end;
        continue;
      }
    }
    if (c === "[") {
      const link = linkAt(text, i);
      if (link) {
        const href = safeURL(link.url);
        if (href) push({ type: "link", href, children: parseInline(link.label) });
        else plain += text.slice(i, link.end); // not http(s): shown as the text it is
        i = link.end;
        continue;
      }
    }
    if (c === "<") {
      const auto = /^<(https?:\/\/[^\s<>]+)>/i.exec(rest);
      const href = auto && safeURL(auto[1]);
      if (href) {
        push({ type: "link", href, children: [{ type: "text", text: auto[1] }] });
        i += auto[0].length;
        continue;
      }
    }
    if ((c === "h" || c === "H") && !/\w$/.test(plain)) {
      const bare = BARE_URL.exec(rest);
      const href = bare && safeURL(bare[0]);
      if (href) {
        push({ type: "link", href, children: [{ type: "text", text: bare[0] }] });
        i += bare[0].length;
        continue;
      }
    }
    if (c === "*" || c === "_" || c === "~") {
      const span = emphasisAt(text, i, plain);
      if (span) {
        push({ type: span.type, children: parseInline(span.inner) });
        i = span.end;
        continue;
      }
      const run = new RegExp(`^\\${c}+`).exec(rest)[0];
      plain += run;
      i += run.length;
      continue;
    }
    plain += c;
    i++;
  }
  flush();
  return out;
}

// [label](url) starting at `i` (the "["), with nested brackets in the label and parentheses in the URL.
function linkAt(text, i) {
  let depth = 0;
  let k = i;
  for (; k < text.length; k++) {
    if (text[k] === "\\") k++;
    else if (text[k] === "[") depth++;
    else if (text[k] === "]" && --depth === 0) break;
  }
  if (k >= text.length || text[k + 1] !== "(") return null;
  const label = text.slice(i + 1, k);
  let parens = 0;
  let j = k + 2;
  for (; j < text.length; j++) {
    if (text[j] === "(") parens++;
    else if (text[j] === ")" && parens-- === 0) break;
    else if (text[j] === "\n") return null;
  }
  if (j >= text.length) return null;
  const url = text.slice(k + 2, j).trim().split(/\s+/)[0] || "";
  return { label, url, end: j + 1 };
}

// **strong**, __strong__, *em*, _em_, ~~del~~ at `i`: the closing run must follow non-space text; underscores
// inside words (snake_case) are not emphasis.
function emphasisAt(text, i, before) {
  const c = text[i];
  const run = new RegExp(`^\\${c}+`).exec(text.slice(i))[0];
  if (c === "~" && run.length !== 2) return null;
  if (c === "_" && /[\p{L}\p{N}]$/u.test(before)) return null;
  const size = c === "~" ? 2 : Math.min(run.length, 3) === 1 ? 1 : 2;
  const open = c.repeat(size);
  const from = i + size;
  if (!text[from] || /\s/.test(text[from])) return null;
  for (let k = from + 1; k <= text.length - size; k++) {
    if (text[k] === "\\") {
      k++;
      continue;
    }
    if (text[k] === "`") { // a code span inside the emphasis is skipped as a whole
      const tick = /^`+/.exec(text.slice(k))[0];
      const end = text.indexOf(tick, k + tick.length);
      if (end > 0) k = end + tick.length - 1;
      continue;
    }
    if (text.startsWith(open, k) && !/\s/.test(text[k - 1]) && text[k + size] !== c) {
      if (c === "_" && /[\p{L}\p{N}]/u.test(text[k + size] ?? "")) continue;
      return { type: c === "~" ? "del" : size === 2 ? "strong" : "em", inner: text.slice(from, k), end: k + size };
    }
  }
  return null;
}

// DOM for blocks and inline nodes: createElement and textContent only.
export function renderBlock(block, doc, options = {}) {
  const el = (tag, cls) => {
    const node = doc.createElement(tag);
    if (cls) node.className = cls;
    return node;
  };
  switch (block.type) {
    case "heading": {
      const h = el(`h${Math.min(6, block.level + 2)}`); // inside a chat bubble, h1 would shout
      h.append(...renderInline(block.inline, doc));
      return h;
    }
    case "rule":
      return el("hr");
    case "quote": {
      const q = el("blockquote");
      q.append(...block.blocks.map((b) => renderBlock(b, doc, options)));
      return q;
    }
    case "list": {
      const list = el(block.ordered ? "ol" : "ul");
      if (block.ordered && block.start !== 1) list.start = block.start;
      for (const item of block.items) {
        const li = el("li");
        for (const b of item) {
          // A tight list's paragraphs are bare text, as in a written list.
          if (b.type === "paragraph" && !block.loose) li.append(...renderInline(b.inline, doc));
          else li.append(renderBlock(b, doc, options));
        }
        list.append(li);
      }
      return list;
    }
    case "code": {
      const box = el("div", "code-block");
      const bar = el("div", "code-bar");
      const lang = el("span", "code-lang");
      lang.textContent = block.lang;
      const copy = el("button", "copy-code");
      copy.type = "button";
      copy.textContent = "Copy";
      copy.setAttribute("aria-label", `Copy the ${block.lang ? block.lang + " " : ""}code`);
      copy.addEventListener("click", () => options.copy?.(block.text, copy));
      bar.append(lang, copy);
      const pre = el("pre");
      const code = el("code");
      if (block.lang) code.dataset.lang = block.lang;
      code.textContent = block.text;
      pre.append(code);
      box.append(bar, pre);
      return box;
    }
    case "table": {
      const wrap = el("div", "table-wrap");
      const table = el("table");
      const row = (cellsOf, tag) => {
        const tr = el("tr");
        cellsOf.forEach((inline, k) => {
          const cell = el(tag);
          if (block.align[k]) cell.style.textAlign = block.align[k];
          cell.append(...renderInline(inline, doc));
          tr.append(cell);
        });
        return tr;
      };
      const thead = el("thead");
      thead.append(row(block.head, "th"));
      const tbody = el("tbody");
      tbody.append(...block.rows.map((r) => row(r, "td")));
      table.append(thead, tbody);
      wrap.append(table);
      return wrap;
    }
    default: {
      const p = el("p");
      p.append(...renderInline(block.inline, doc));
      return p;
    }
  }
}

export function renderInline(nodes, doc) {
  return nodes.map((node) => {
    switch (node.type) {
      case "text": return doc.createTextNode(node.text);
      case "br": return doc.createElement("br");
      case "code": {
        const code = doc.createElement("code");
        code.textContent = node.text;
        return code;
      }
      case "link": {
        const a = doc.createElement("a");
        a.href = node.href; // checked by safeURL: http(s) only
        a.rel = "noopener noreferrer";
        a.target = "_blank";
        if (node.image) a.className = "image-link";
        a.append(...renderInline(node.children, doc));
        return a;
      }
      default: {
        const tag = { strong: "strong", em: "em", del: "del" }[node.type];
        const span = doc.createElement(tag);
        span.append(...renderInline(node.children, doc));
        return span;
      }
    }
  });
}

// A reply's Markdown kept in step with its text while it streams: blocks whose source did not change keep their
// nodes (no flicker, a selection or a focused copy button survives); only the changed tail is built again.
export class MarkdownView {
  constructor(container, options = {}) {
    this.container = container;
    this.options = options;
    this.blocks = []; // [{src, node}]
    this.text = "";
  }

  update(text) {
    if (text === this.text) return;
    this.text = text;
    const blocks = parseBlocks(text);
    let keep = 0;
    while (keep < blocks.length && keep < this.blocks.length && blocks[keep].src === this.blocks[keep].src &&
           (blocks[keep].type !== "code" || blocks[keep].closed === this.blocks[keep].closed)) keep++;
    for (const old of this.blocks.splice(keep)) old.node.remove();
    const doc = this.container.ownerDocument;
    for (const block of blocks.slice(keep)) {
      const node = renderBlock(block, doc, this.options);
      this.container.append(node);
      this.blocks.push({ src: block.src, closed: block.closed, node });
    }
  }
}
