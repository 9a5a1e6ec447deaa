// <llm-chat>: a chat box whose model runs on the visitor's own GPU (or on an OpenAI-compatible server).
//
//   <script type="module" src="/llm-chat.js"></script>
//   <llm-chat model="/models/SmolLM2-135M-Instruct.Q4_1.gguf" system-prompt="Be brief."></llm-chat>
//
// Attributes: model (a GGUF URL, or a Hugging Face reference such as hf://ORG/REPO/FILE.gguf or ORG/REPO:QUANT),
// integrity (sha256 of the model), system-prompt, endpoint (OpenAI-compatible /v1 URL), mode (auto | local |
// remote), remote-model (the model name sent to the endpoint), temperature, max-tokens, context-size, pyodide-url
// (to load Pyodide from a CDN), hub-endpoint (a Hugging Face mirror), profile (a device profile such as "phone":
// its limits and GPU memory budget apply, and a model over the budget is refused before downloading), placeholder. Properties: tools (OpenAI
// function tools the model may call), maxToolRounds (default 8). Events (bubbling, composed; details in the README): llm-progress, llm-ready,
// llm-token, llm-done, llm-error, and llm-tool-call (answer it with event.detail.respond(result)). Styling: CSS
// custom properties --llm-chat-* and parts (container, status, progress, warning, log, message, user, assistant,
// reasoning, tool, form, input, send, stop). Model output is always inserted as text, never as HTML.

import { Engine, createEngine, probeWebGPU } from "./engine.js";

export { Engine, createEngine, probeWebGPU };

const STYLE = `
:host {
  display: block;
  font: var(--llm-chat-font, 15px/1.45 system-ui, sans-serif);
  color: var(--llm-chat-fg, #1d1d1f);
  background: var(--llm-chat-bg, #fff);
  border: var(--llm-chat-border, 1px solid #d0d0d7);
  border-radius: var(--llm-chat-radius, 12px);
  overflow: hidden;
}
:host([hidden]) { display: none; }
.container { display: flex; flex-direction: column; height: var(--llm-chat-height, 28rem); }
.status { padding: .5rem .8rem; font-size: .85em; color: var(--llm-chat-muted, #5f5f6b);
  border-bottom: 1px solid var(--llm-chat-rule, #ececf1); }
.status[data-state="error"] { color: var(--llm-chat-error, #b00020); }
progress { width: 100%; height: .35rem; display: block; accent-color: var(--llm-chat-accent, #3b5bdb); }
progress[hidden] { display: none; }
.warning { padding: .4rem .8rem; font-size: .85em; background: var(--llm-chat-warning-bg, #fff4d6); }
.warning[hidden] { display: none; }
.log { flex: 1; overflow-y: auto; margin: 0; padding: .8rem; list-style: none; display: flex;
  flex-direction: column; gap: .6rem; }
.message { max-width: 85%; padding: .5rem .75rem; border-radius: var(--llm-chat-bubble-radius, 10px);
  white-space: pre-wrap; overflow-wrap: anywhere; }
.user { align-self: flex-end; background: var(--llm-chat-user-bg, #3b5bdb); color: var(--llm-chat-user-fg, #fff); }
.assistant { align-self: flex-start; background: var(--llm-chat-assistant-bg, #f1f1f5); }
.reasoning, .tool { align-self: flex-start; font-size: .85em; color: var(--llm-chat-muted, #5f5f6b);
  background: var(--llm-chat-aside-bg, #fafafc); border: 1px dashed var(--llm-chat-rule, #d0d0d7); }
form { display: flex; gap: .5rem; padding: .6rem; border-top: 1px solid var(--llm-chat-rule, #ececf1); }
textarea { flex: 1; resize: none; font: inherit; padding: .45rem .6rem; border-radius: 8px;
  border: 1px solid var(--llm-chat-rule, #c9c9d3); min-height: 2.4rem; }
button { font: inherit; padding: 0 1rem; border-radius: 8px; border: 0; cursor: pointer;
  background: var(--llm-chat-accent, #3b5bdb); color: var(--llm-chat-accent-fg, #fff); }
button[hidden] { display: none; }
button:disabled { opacity: .5; cursor: default; }
button.stop { background: var(--llm-chat-stop-bg, #6b6b76); }
:focus-visible { outline: 2px solid var(--llm-chat-accent, #3b5bdb); outline-offset: 2px; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
`;

let instances = 0;

export class LLMChatElement extends HTMLElement {
  static observedAttributes = ["model", "endpoint", "mode", "integrity", "context-size", "pyodide-url",
    "remote-model", "hub-endpoint", "profile"];

  constructor() {
    super();
    const id = `llm-chat-input-${++instances}`;
    const root = this.attachShadow({ mode: "open" });
    root.innerHTML = `<style>${STYLE}</style>
      <div class="container" part="container">
        <div class="status" part="status"><span role="status"></span> <span class="numbers" aria-hidden="true"></span></div>
        <progress part="progress" max="1" value="0" aria-label="Model download progress" hidden></progress>
        <div class="warning" part="warning" role="note" hidden></div>
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
    if (!this.engine) this.#start();
  }

  attributeChangedCallback(name, old, value) {
    if (old === value || !this.isConnected) return;
    if (this.engine) { // a different model or server: start over
      this.engine.terminate();
      this.engine = null;
      this.history = [];
      this.$(".log").replaceChildren();
    }
    this.#start();
  }

  #number(name, fallback) {
    const value = Number.parseFloat(this.getAttribute(name));
    return Number.isFinite(value) ? value : fallback;
  }

  #start() {
    const model = this.getAttribute("model");
    const endpoint = this.getAttribute("endpoint");
    if (!model && !endpoint) return this.#status("Set the model attribute to a GGUF file URL.", "error");
    this.#status("Starting…");
    const engine = new Engine({
      model, endpoint, mode: this.getAttribute("mode") || "auto", integrity: this.getAttribute("integrity"),
      remoteModel: this.getAttribute("remote-model") || undefined,
      context: this.#number("context-size", 2048), pyodideURL: this.getAttribute("pyodide-url") || undefined,
      hubEndpoint: this.getAttribute("hub-endpoint") || undefined, profile: this.getAttribute("profile") || undefined,
    });
    this.engine = engine;
    engine.addEventListener("status", ({ detail }) => this.#status(detail.text));
    engine.addEventListener("warning", ({ detail }) => {
      const box = this.$(".warning");
      box.textContent = detail.message;
      box.hidden = false;
    });
    engine.addEventListener("progress", ({ detail }) => this.#progress(detail));
    engine.addEventListener("ready", ({ detail }) => {
      this.$("progress").hidden = true;
      this.#status(detail.remote ? `Using ${detail.endpoint} (${detail.reason})` :
        `Ready: ${detail.model} on ${detail.software ? "a software (CPU) WebGPU adapter" : "this device's GPU"}` +
        (detail.fromCache ? ", from the offline cache" : ""));
      this.#enable(true);
      this.#fire("llm-ready", detail);
    });
    engine.addEventListener("error", ({ detail }) => {
      this.#status(detail.message, "error");
      this.$("progress").hidden = true;
      this.#enable(false);
      this.#fire("llm-error", detail);
    });
  }

  #progress(detail) {
    const bar = this.$("progress");
    const fraction = detail.total ? detail.loaded / detail.total : 0;
    bar.hidden = false;
    bar.value = fraction;
    const verb = detail.phase === "download" ? (detail.cached ? "Found in cache" : "Downloading") : "Loading onto the GPU";
    bar.setAttribute("aria-valuetext", `${verb}: ${Math.round(fraction * 100)}%`);
    // The live region hears each phase once; the running numbers are for the eyes (and the progress bar).
    if (this.$(".status [role=status]").textContent !== `${verb}…`) this.#status(`${verb}…`);
    this.$(".numbers").textContent = `${mib(detail.loaded)} of ${mib(detail.total)} (${Math.floor(fraction * 100)}%)`;
    this.#fire("llm-progress", { ...detail, fraction });
  }

  // Send a user message and stream the reply. Resolves with the reply text. When the model calls tools, each call
  // fires llm-tool-call, the results go back to the model, and the reply goes on (at most maxToolRounds times).
  async send(text) {
    text = (text ?? "").trim();
    if (!text || this.current || !this.engine) return "";
    this.$("textarea").value = "";
    const log = this.$(".log");
    const start = { history: this.history.length, bubbles: log.children.length + 1 }; // the user's bubble stays
    this.history.push({ role: "user", content: text });
    this.#bubble("user", text);
    log.setAttribute("aria-busy", "true"); // announce the reply once, complete, not token by token
    this.#busy(true);
    let reply = "";
    try {
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
      this.history.length = start.history; // a turn cut by an error is not kept half-written
      while (log.children.length > start.bubbles) log.lastElementChild.remove();
      this.#status(error.message, "error");
      this.#fire("llm-error", { code: error.code || "error", message: error.message });
    } finally {
      this.current = null;
      log.setAttribute("aria-busy", "false");
      this.#busy(false);
    }
    return reply;
  }

  // One completion, streamed into bubbles: the content, a reasoning model's thinking, and tool calls as they form.
  async #turn(toolsAllowed) {
    const log = this.$(".log");
    const system = this.getAttribute("system-prompt");
    const messages = [...(system ? [{ role: "system", content: system }] : []), ...this.history];
    const tools = Array.isArray(this.tools) && this.tools.length ? this.tools : null;
    const stream = await this.engine.chat.completions.create({
      messages, stream: true, max_tokens: this.#number("max-tokens", 256),
      temperature: this.#number("temperature", 0),
      ...(tools ? { tools, tool_choice: toolsAllowed ? "auto" : "none" } : {}),
    });
    this.current = stream;
    let content = "";
    let reasoning = "";
    let bubble = null;
    let thinking = null;
    let finish = null;
    const calls = [];
    for await (const chunk of stream) {
      const delta = chunk.choices[0].delta ?? {};
      const piece = delta.content ?? "";
      if (delta.reasoning_content) {
        reasoning += delta.reasoning_content;
        thinking ??= this.#bubble("reasoning", "");
        thinking.textContent = reasoning;
      }
      if (piece) {
        content += piece;
        bubble ??= this.#bubble("assistant", "");
        bubble.textContent = content; // text, never markup: model output cannot inject HTML or script
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
        this.#fire("llm-done", { text: content, finish_reason: finish, usage: chunk.usage,
          timings: chunk.llmchat?.timings, ...(calls.length ? { tool_calls: calls } : {}) });
      }
    }
    const message = { role: "assistant", content };
    if (calls.length && finish === "tool_calls") message.tool_calls = calls;
    else if (!bubble) this.#bubble("assistant", "");
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

  // Stop the reply being generated (what was streamed so far stays in the conversation).
  stop() {
    this.current?.controller.abort();
  }

  // Clear the conversation.
  reset() {
    this.stop();
    this.history = [];
    this.$(".log").replaceChildren();
    this.engine?.reset();
  }

  #bubble(role, text) {
    const item = document.createElement("li");
    item.className = `message ${role}`;
    item.setAttribute("part", `message ${role}`);
    const label = document.createElement("span");
    label.className = "visually-hidden";
    label.textContent = { user: "You said: ", reasoning: "Thinking: ", tool: "Tool: " }[role] || "Reply: ";
    const body = document.createElement("span");
    body.textContent = text;
    item.append(label, body);
    this.$(".log").append(item);
    return body;
  }

  #busy(busy) {
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

function mib(bytes) {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

if (!customElements.get("llm-chat")) customElements.define("llm-chat", LLMChatElement);
