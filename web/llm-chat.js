// <llm-chat>: a chat box whose model runs on the visitor's own GPU (or on an OpenAI-compatible server).
//
//   <script type="module" src="/llm-chat.js"></script>
//   <llm-chat model="/models/SmolLM2-135M-Instruct.Q4_1.gguf" system-prompt="Be brief."></llm-chat>
//
// Attributes: model (a GGUF URL, or a Hugging Face reference such as hf://ORG/REPO/FILE.gguf or ORG/REPO:QUANT),
// integrity (sha256 of the model), system-prompt, endpoint (OpenAI-compatible /v1 URL), mode (auto | local |
// remote), remote-model (the model name sent to the endpoint), temperature, max-tokens, context-size, pyodide-url
// (to load Pyodide from a CDN), hub-endpoint (a Hugging Face mirror), profile (a device profile such as "phone":
// its limits and GPU memory budget apply, and a model over the budget is refused before downloading), placeholder,
// preload (load the model at once, even while the element is out of sight; without it loading starts when the
// element first shows), render (markdown | text), persist ("false": the conversation is not kept across reloads),
// shared ("false": this page runs a model of its own rather than the one the site's other tabs share), tune
// ("true"/"false": time kernel variants on a first load and keep the fastest in OPFS; default on for hardware GPUs).
// Properties: tools (OpenAI function tools the model may call), maxToolRounds (default 8). Methods: send(text),
// regenerate(), edit(index, text), stop(), reset(), showStorage(). Events (bubbling, composed; details in the
// README): llm-progress (the download, the load, and the reading of each prompt), llm-ready, llm-token, llm-done
// (finish_reason "abort" for a reply the user stopped), llm-error, llm-restore, and llm-tool-call (answer it with
// event.detail.respond(result)). A stopped reply stays in the conversation marked `stopped: true` (and shows so).
// Styling: CSS custom properties --llm-chat-* and parts (container, status, progress, warning, storage, log,
// message, user, assistant, stopped, note, reasoning, tool, actions, form, input, send, stop). Model output
// is never inserted as HTML: Markdown is built into DOM nodes by web/markdown.js, or shown as plain text with
// render="text".

import { Engine } from "./engine.js";
import { conversationKey, loadConversation, saveConversation } from "./chat-store.js";
import { copyText } from "./clipboard.js";
import { STYLE } from "./llm-chat-style.js";
import { MarkdownView } from "./markdown.js";
import { mib, storagePanel } from "./storage-panel.js";

export { Engine, createEngine, deleteConversations, deleteModel, hasModel, listModels, probeWebGPU, storageEstimate }
  from "./engine.js";

let instances = 0;

export class LLMChatElement extends HTMLElement {
  static observedAttributes = ["model", "endpoint", "mode", "integrity", "context-size", "pyodide-url",
    "remote-model", "hub-endpoint", "preload", "profile", "shared", "tune"];

  constructor() {
    super();
    const id = `llm-chat-input-${++instances}`;
    const root = this.attachShadow({ mode: "open" });
    root.innerHTML = `<style>${STYLE}</style>
      <div class="container" part="container">
        <div class="status" part="status"><span role="status"></span> <span class="numbers" aria-hidden="true"></span></div>
        <progress part="progress" max="1" value="0" aria-label="Progress" hidden></progress>
        <div class="warning" part="warning" role="note" hidden></div>
        <section class="storage" part="storage" aria-label="Stored models" hidden></section>
        <ol class="log" part="log" aria-live="polite" aria-label="Conversation"></ol>
        <form part="form">
          <label class="visually-hidden" for="${id}">Message</label>
          <textarea id="${id}" part="input" rows="1" disabled></textarea>
          <button type="submit" part="send" class="send" disabled>Send</button>
          <button type="button" part="stop" class="stop" hidden>Stop</button>
        </form>
      </div>`;
    this.$ = (selector) => root.querySelector(selector);
    this.history = []; // the conversation as OpenAI messages, system prompt excluded
    this.tools = null; // OpenAI function tools the model may call; the page answers llm-tool-call events
    this.maxToolRounds = 8; // completions in a turn that may call tools; the one after them must answer in words
    this.engine = null;
    this.current = null; // the reply being streamed
    this.busy = false; // a turn (or a restore) is running
    this.$("form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.send(this.$("textarea").value);
    });
    this.$("textarea").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        this.$("form").requestSubmit();
      }
    });
    root.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.current) this.stop();
    });
    this.$(".stop").addEventListener("click", () => this.stop());
  }

  connectedCallback() {
    this.$("textarea").placeholder = this.getAttribute("placeholder") || "Type a message";
    if (!this.engine) this.#startWhenWanted();
  }

  // A chat out of sight (a closed widget, far down the page) downloads nothing until it shows; with the `preload`
  // attribute the model loads at once, so that it is ready when the chat opens.
  #startWhenWanted() {
    this.visibility?.disconnect();
    this.visibility = null;
    if (this.hasAttribute("preload") || !globalThis.IntersectionObserver) return this.#start();
    this.visibility = new IntersectionObserver((entries) => {
      if (!entries.some((entry) => entry.isIntersecting) || this.engine || !this.isConnected) return;
      this.visibility.disconnect();
      this.visibility = null;
      this.#start();
    });
    this.visibility.observe(this);
  }

  attributeChangedCallback(name, old, value) {
    if (old === value || !this.isConnected) return;
    if (this.visibility) { // waiting to be seen: it starts then, with the attributes it has then
      if (name === "preload" && value !== null) this.#startWhenWanted();
      return;
    }
    // Upgrading: attributes are reported before connectedCallback, which starts the element once, with all of them.
    if (!this.started || name === "preload") return;
    if (this.engine) { // a different model or server: start over
      this.engine.terminate();
      this.engine = null;
      this.history = [];
      this.$(".log").replaceChildren();
    }
    this.#start();
  }

  get #persisted() {
    return this.getAttribute("persist") !== "false";
  }

  // Keep the conversation for the next visit (unless persist="false"); a save that fails is said, not dropped.
  #save() {
    if (!this.#persisted || !this.storeKey) return;
    const error = saveConversation(this.storeKey, this.history);
    if (error) this.#warn(`This conversation could not be saved for your next visit (${error.name}: ${error.message}).`);
  }

  #warn(message) {
    const box = this.$(".warning");
    box.textContent = message;
    box.hidden = false;
  }

  #number(name, fallback) {
    const value = Number.parseFloat(this.getAttribute(name));
    return Number.isFinite(value) ? value : fallback;
  }

  #start() {
    this.started = true;
    const model = this.getAttribute("model");
    const endpoint = this.getAttribute("endpoint");
    if (!model && !endpoint) return this.#status("Set the model attribute to a GGUF file URL.", "error");
    this.#status("Starting…");
    this.$(".storage").hidden = true;
    this.storeKey = conversationKey(this, model || endpoint);
    if (this.#persisted && !this.history.length) {
      this.history = loadConversation(this.storeKey);
      this.#renderLog();
    }
    const engine = new Engine({
      model, endpoint, mode: this.getAttribute("mode") || "auto", integrity: this.getAttribute("integrity"),
      remoteModel: this.getAttribute("remote-model") || undefined,
      context: this.#number("context-size", null), pyodideURL: this.getAttribute("pyodide-url") || undefined,
      hubEndpoint: this.getAttribute("hub-endpoint") || undefined, profile: this.getAttribute("profile") || undefined,
      shared: this.getAttribute("shared") !== "false",
      tune: this.hasAttribute("tune") ? this.getAttribute("tune") !== "false" : undefined,
    });
    this.engine = engine;
    // An engine replaced (its attributes changed while it started) may still finish starting: it is not heard.
    const on = (type, handler) => engine.addEventListener(type, ({ detail }) => {
      if (this.engine === engine) handler(detail);
    });
    on("status", (detail) => this.#status(detail.text));
    on("warning", (detail) => this.#warn(detail.message));
    on("progress", (detail) => this.#progress(detail));
    on("ready", (detail) => {
      this.$("progress").hidden = true;
      // Where the model runs, always: on the visitor's device their messages stay there; on a server they do not.
      this.readyText = detail.remote ?
        `Ready: the model runs on the server at ${detail.host}, not in this browser ` +
          `(${detail.reason.replace(/\.$/, "")})` :
        `Ready: ${detail.model}, running in this browser on ` +
        (detail.software ? "a software (CPU) WebGPU adapter" : "this device's GPU") +
        (detail.fromCache ? ", from the offline cache" : "");
      this.#status(this.readyText);
      this.#enable(true);
      this.#fire("llm-ready", detail);
      if (this.history.length && !detail.remote) this.#rebuild();
    });
    on("error", (detail) => {
      this.#status(detail.message, "error");
      this.$("progress").hidden = true;
      this.#enable(false);
      this.#fire("llm-error", detail);
      if (detail.code === "quota") this.showStorage();
    });
  }

  // A restored conversation's KV cache, ready before the next message is sent: read back from this site's storage
  // where the engine kept it (prompt_cache_key), else computed in one prefill (a one-token completion of the whole
  // history). Either way only what follows it is computed when that message comes.
  async #rebuild() {
    const t0 = performance.now();
    const restoring = this.#reply(null, async () => {
      this.#status("Restoring the conversation…");
      let usage = null;
      let ours = {}; // llmchat's fields of the finishing chunk
      for await (const chunk of await this.engine.chat.completions.create({ messages: this.#messages(), max_tokens: 1,
        stream: true, stream_options: { include_usage: true }, ...this.#cacheKey() })) {
        usage = chunk.usage ?? usage;
        ours = chunk.llmchat ?? ours;
      }
      return { prompt_tokens: usage?.prompt_tokens ?? 0, cached_tokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
        timings: ours.timings, kv_cache: ours.kv_cache ?? null };
    });
    this.restoring = restoring.catch(() => {}).finally(() => { this.restoring = null; });
    try {
      const usage = await restoring;
      if (!usage) return;
      const ms = performance.now() - t0;
      const stored = usage.kv_cache?.restored > 0;
      this.#status(`Conversation restored (${this.history.length} messages, ${usage.prompt_tokens} tokens, ` +
        `${stored ? `${usage.cached_tokens} read from storage` : "computed again"}, in ${(ms / 1000).toFixed(1)} s)`);
      this.#fire("llm-restore", { messages: this.history.length, prompt_tokens: usage.prompt_tokens,
        cached_tokens: usage.cached_tokens, ms, prefill_tok_s: usage.timings?.prefill_tok_s ?? null,
        kv_cache: usage.kv_cache });
    } catch { /* reported by #reply */ }
  }

  // The conversation's KV cache is kept in this site's storage beside its text (persist), on this device only.
  #cacheKey() {
    return this.#persisted && this.storeKey && this.engine?.mode === "local" ? { prompt_cache_key: this.storeKey } : {};
  }

  // What this site stores (models, sizes, free space), each model with a Delete button; shown by itself when a
  // download runs out of space. After a deletion, "Try again" starts the model's load over.
  async showStorage() {
    const box = this.$(".storage");
    box.replaceChildren(...await storagePanel({
      warn: (message) => this.#warn(message),
      changed: () => this.showStorage(),
      retry: () => {
        this.engine?.terminate();
        this.engine = null;
        this.#start();
      },
    }));
    box.hidden = false;
  }

  // Progress of a phase: "download" and "load" in bytes, "prefill" (the model reading a prompt) in tokens.
  #progress(detail) {
    const bar = this.$("progress");
    const fraction = detail.total ? detail.loaded / detail.total : 0;
    bar.hidden = false;
    bar.value = fraction;
    const verb = { download: detail.cached ? "Found in cache" : "Downloading", load: "Loading onto the GPU",
      prefill: "Reading your message" }[detail.phase];
    bar.setAttribute("aria-valuetext", `${verb}: ${Math.round(fraction * 100)}%`);
    // The live region hears each phase once; the running numbers are for the eyes (and the progress bar).
    if (this.$(".status [role=status]").textContent !== `${verb}…`) this.#status(`${verb}…`);
    const amount = detail.phase === "prefill" ? `${detail.loaded} of ${detail.total} tokens` :
      `${mib(detail.loaded)} of ${mib(detail.total)}`;
    this.$(".numbers").textContent = `${amount} (${Math.floor(fraction * 100)}%)`;
    this.#fire("llm-progress", { ...detail, fraction });
  }

  // Send a user message and stream the reply. Resolves with the reply text. When the model calls tools, each call
  // fires llm-tool-call, the results go back to the model, and the reply goes on (at most maxToolRounds times).
  async send(text) {
    text = (text ?? "").trim();
    if (text && this.restoring) await this.restoring; // a message sent during a restore waits for it, not lost
    if (!text || this.current || this.busy || !this.engine) return "";
    this.$("textarea").value = "";
    this.history.push({ role: "user", content: text });
    this.#bubble("user", text, this.history.length - 1);
    return this.#reply(this.history.length - 1);
  }

  // Answer the last user message again (its reply, and any tool calls in it, are replaced).
  async regenerate() {
    if (this.current || this.busy || !this.engine) return "";
    const last = this.history.findLastIndex((m) => m.role === "user");
    if (last < 0) return "";
    this.history.length = last + 1;
    this.#renderLog();
    return this.#reply(last);
  }

  // Replace user message `index` (of this.history) with `text`: the conversation is cut there and answered again.
  // The engine keeps the KV cache of everything before the edit (its prefix cache), so only the rest is computed.
  async edit(index, text) {
    text = (text ?? "").trim();
    if (!text || this.current || this.busy || !this.engine || this.history[index]?.role !== "user") return "";
    this.history.length = index;
    this.history.push({ role: "user", content: text });
    this.#renderLog();
    return this.#reply(index);
  }

  // Run the turn after user message `from` (null: a job that adds nothing to the conversation). An error cuts the
  // conversation back to before that message, and the half-written reply is taken away (the user's bubble stays).
  async #reply(from, job = null) {
    const log = this.$(".log");
    const bubbles = log.children.length;
    log.setAttribute("aria-busy", "true"); // announce the reply once, complete, not token by token
    this.#busy(true);
    let reply = "";
    try {
      if (job) return await job();
      for (let round = 0; ; round++) {
        const turn = await this.#turn(round < this.maxToolRounds);
        reply = turn.message.content;
        this.history.push(turn.message);
        if (!turn.message.tool_calls) break;
        for (const call of turn.message.tool_calls) {
          const result = await this.#callTool(call);
          this.history.push({ role: "tool", tool_call_id: call.id, content: result });
          this.#bubble("tool", `${call.function.name} → ${result}`);
        }
      }
    } catch (error) {
      if (from !== null) this.history.length = from; // a turn cut by an error is not kept half-written
      while (log.children.length > bubbles) log.lastElementChild.remove();
      // The message says what went wrong; a conversation grown past the context can still go on from earlier.
      const message = error.code !== "context-overflow" ? error.message : `${error.message.replace(/\.$/, "")}. ` +
        "The conversation no longer fits the model's context: edit an earlier message of yours to go on from there.";
      this.#status(message, "error");
      this.#fire("llm-error", { code: error.code || "error", message });
      if (job) throw error;
    } finally {
      this.current = null;
      this.$("progress").hidden = true; // a prompt's progress, if the turn ended while it was read
      log.setAttribute("aria-busy", "false");
      this.#busy(false);
      if (!job) this.#save();
    }
    return reply;
  }

  #messages() {
    const system = this.getAttribute("system-prompt");
    // `stopped` is the element's own mark: servers refuse fields OpenAI's messages do not have.
    const history = this.history.map(({ stopped, ...message }) => message);
    return [...(system ? [{ role: "system", content: system }] : []), ...history];
  }

  // One completion, streamed into bubbles: the content, a reasoning model's thinking, and tool calls as they form.
  async #turn(toolsAllowed) {
    const log = this.$(".log");
    const messages = this.#messages();
    const tools = Array.isArray(this.tools) && this.tools.length ? this.tools : null;
    // The prompt is computed before the first word comes: seconds on a slow GPU, which must not look like nothing.
    this.#status("Reading your message…");
    // An attribute left unset leaves its field out: the engine's defaults then apply (web/request-defaults.js).
    const stream = await this.engine.chat.completions.create({
      messages, stream: true, stream_options: { include_usage: true }, max_tokens: this.#number("max-tokens", null),
      temperature: this.#number("temperature", null), ...this.#cacheKey(),
      ...(tools ? { tools, tool_choice: toolsAllowed ? "auto" : "none" } : {}),
    });
    this.current = stream;
    let content = "";
    let reasoning = "";
    let bubble = null;
    let thinking = null;
    let finish = null;
    let timings;
    let usage = null;
    let writing = false;
    const calls = [];
    for await (const chunk of stream) {
      if (!chunk.choices.length) { // the closing chunk: the usage alone
        usage = chunk.usage;
        continue;
      }
      const prefill = chunk.llmchat?.prefill;
      if (prefill) {
        this.#progress({ phase: "prefill", loaded: prefill.done, total: prefill.total });
        continue;
      }
      const delta = chunk.choices[0].delta ?? {};
      const piece = delta.content ?? "";
      if (!writing && (chunk.llmchat?.token !== undefined || piece || delta.reasoning_content || delta.tool_calls)) {
        writing = true; // the prompt is in
        this.$("progress").hidden = true;
        this.#status("Writing the reply…");
      }
      if (delta.reasoning_content) {
        reasoning += delta.reasoning_content;
        thinking ??= this.#bubble("reasoning", "");
        thinking.textContent = reasoning;
      }
      if (piece) {
        content += piece;
        bubble ??= this.#bubble("assistant", "", this.history.length);
        this.#show(bubble, content); // DOM nodes or text, never markup: model output cannot inject HTML or script
      }
      for (const part of delta.tool_calls ?? []) {
        const call = (calls[part.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
        if (part.id) call.id = part.id;
        if (part.function?.name) call.function.name += part.function.name;
        if (part.function?.arguments) call.function.arguments += part.function.arguments;
      }
      log.scrollTop = log.scrollHeight;
      if (chunk.llmchat?.token !== undefined || piece) {
        this.#fire("llm-token", { text: piece, token: chunk.llmchat?.token });
      }
      if (chunk.choices[0].finish_reason) {
        finish = chunk.choices[0].finish_reason;
        timings = chunk.llmchat?.timings;
      }
    }
    if (finish) {
      this.#fire("llm-done", { text: content, finish_reason: finish, usage, timings,
        ...(calls.length ? { tool_calls: calls } : {}) });
    }
    const message = { role: "assistant", content };
    if (calls.length && finish === "tool_calls") message.tool_calls = calls;
    else bubble ??= this.#bubble("assistant", "", this.history.length);
    if (finish === "abort") {
      message.stopped = true;
      if (bubble) this.#markStopped(bubble.parentElement);
    }
    this.#status(this.readyText);
    return { message };
  }

  // Ask the page for a tool's result: llm-tool-call carries the call and respond(result or a Promise of it). A call
  // nobody answers gets an error result, so the model hears of it instead of the chat waiting forever.
  async #callTool(call) {
    this.#bubble("tool", `${call.function.name}(${call.function.arguments})`);
    let args = null;
    try { args = JSON.parse(call.function.arguments || "{}"); } catch { /* the page still gets the raw text */ }
    let answer = null;
    this.#fire("llm-tool-call", { id: call.id, name: call.function.name, arguments: call.function.arguments, args,
      respond: (result) => { answer ??= Promise.resolve(result); } });
    if (!answer) return `error: nothing answered the call to ${call.function.name}`;
    try {
      const result = await answer;
      return typeof result === "string" ? result : JSON.stringify(result);
    } catch (error) {
      return `error: ${error?.message || error}`;
    }
  }

  // A reply the user stopped: what it says is not all the model would have said.
  #markStopped(item) {
    item.classList.add("stopped");
    item.setAttribute("part", `${item.getAttribute("part")} stopped`);
    const note = document.createElement("span");
    note.className = "note";
    note.setAttribute("part", "note");
    note.textContent = "Stopped before the end";
    item.querySelector(".body").after(note);
  }

  // Stop the reply being generated (what was streamed so far stays in the conversation, marked as stopped).
  stop() {
    this.current?.controller.abort();
  }

  // Clear the conversation (and its saved copy).
  reset() {
    this.stop();
    this.history = [];
    this.$(".log").replaceChildren();
    const { prompt_cache_key: key } = this.#cacheKey();
    if (key) this.engine.forgetConversation(key).catch(() => {}); // an engine that failed to load kept nothing
    this.engine?.reset();
    this.#save();
  }

  // The log drawn again from this.history (after a restore, an edit or a regeneration).
  #renderLog() {
    this.$(".log").replaceChildren();
    const names = new Map();
    this.history.forEach((message, index) => {
      if (message.role === "user") this.#bubble("user", message.content ?? "", index);
      else if (message.role === "tool") {
        this.#bubble("tool", `${names.get(message.tool_call_id) ?? "tool"} → ${message.content}`);
      } else {
        for (const call of message.tool_calls ?? []) {
          names.set(call.id, call.function.name);
          this.#bubble("tool", `${call.function.name}(${call.function.arguments})`);
        }
        if (message.content || !message.tool_calls) {
          const body = this.#bubble("assistant", message.content ?? "", index);
          if (message.stopped) this.#markStopped(body.parentElement);
        }
      }
    });
  }

  // One message of the log. `index` is its place in this.history (user messages and replies get actions: edit;
  // copy and regenerate).
  #bubble(role, text, index = null) {
    const item = document.createElement("li");
    item.className = `message ${role}`;
    item.setAttribute("part", `message ${role}`);
    if (index !== null) item.dataset.index = index;
    const label = document.createElement("span");
    label.className = "visually-hidden";
    label.textContent = { user: "You said: ", reasoning: "Thinking: ", tool: "Tool: " }[role] || "Reply: ";
    const markdown = role === "assistant" && this.getAttribute("render") !== "text";
    const body = document.createElement(markdown ? "div" : "span");
    body.className = markdown ? "body md" : "body";
    const copy = (what, button) => copyText(this.shadowRoot, what, button);
    if (markdown) body.view = new MarkdownView(body, { copy });
    item.append(label, body);
    if (role === "assistant") {
      item.append(this.#actions(["Copy", "copy", () => copy(item.text, item.querySelector(".copy"))],
        ["Regenerate", "regenerate", () => this.regenerate()]));
    }
    if (role === "user" && index !== null) item.append(this.#actions(["Edit", "edit", () => this.#editing(item)]));
    this.#show(body, text);
    this.$(".log").append(item);
    return body;
  }

  #show(body, text) {
    body.parentElement.text = text; // what Copy copies: the reply's own text, not its rendering
    if (body.view) body.view.update(text);
    else body.textContent = text;
  }

  #actions(...buttons) {
    const bar = document.createElement("div");
    bar.className = "actions";
    bar.setAttribute("part", "actions");
    for (const [label, cls, action] of buttons) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = cls;
      button.textContent = label;
      button.addEventListener("click", action);
      bar.append(button);
    }
    return bar;
  }

  // Edit a user message in place: its bubble becomes a text box; sending it cuts the conversation there.
  #editing(item) {
    if (this.current || this.busy || item.querySelector(".editing")) return;
    const index = Number(item.dataset.index);
    const form = document.createElement("form");
    form.className = "editing";
    const box = document.createElement("textarea");
    box.value = this.history[index].content;
    box.setAttribute("aria-label", "Edit your message");
    const save = this.#actions(["Send", "save", () => form.requestSubmit()], ["Cancel", "cancel", () => {
      form.remove();
      item.querySelector(".body").hidden = false;
    }]);
    save.querySelector(".save").type = "submit";
    form.append(box, save);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.edit(index, box.value);
    });
    item.querySelector(".body").hidden = true;
    item.querySelector(".actions").before(form);
    box.focus();
  }

  // Copy text to the clipboard; where the Clipboard API is missing or refused, through a selected text box.
  #busy(busy) {
    this.busy = busy;
    this.$(".send").disabled = busy;
    this.$(".stop").hidden = !busy;
    if (!busy) this.$("textarea").focus();
  }

  #enable(on) {
    this.$("textarea").disabled = !on;
    this.$(".send").disabled = !on;
  }

  #status(text, state = "") {
    this.$(".status [role=status]").textContent = text;
    this.$(".numbers").textContent = "";
    this.$(".status").dataset.state = state;
  }

  #fire(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail, bubbles: true, composed: true }));
  }
}

if (!customElements.get("llm-chat")) customElements.define("llm-chat", LLMChatElement);
