// The <llm-chat> element's shadow-root styles: CSS custom properties --llm-chat-* and parts theme it from outside.

export const STYLE = `
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
.message .note { display: block; margin-top: .3rem; font-size: .8em; font-style: italic; white-space: normal;
  color: var(--llm-chat-muted, #5f5f6b); }
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
.body.md { white-space: normal; display: block; }
.md > :first-child { margin-top: 0; }
.md > :last-child { margin-bottom: 0; }
.md p, .md ul, .md ol, .md blockquote, .md .code-block, .md .table-wrap { margin: .45em 0; }
.md ul, .md ol { padding-left: 1.4em; }
.md blockquote { border-left: 3px solid var(--llm-chat-rule, #d0d0d7); padding-left: .6em; margin-left: 0; }
.md code { font: .9em/1.4 var(--llm-chat-mono, ui-monospace, monospace); background: var(--llm-chat-code-bg, #e6e6ee);
  padding: 0 .25em; border-radius: 4px; }
.md pre { margin: 0; padding: .5em .6em; overflow-x: auto; white-space: pre; }
.md pre code { background: none; padding: 0; }
.code-block { background: var(--llm-chat-code-bg, #e6e6ee); border-radius: 6px; }
.code-bar { display: flex; justify-content: space-between; align-items: center; font-size: .8em;
  padding: .15em .4em .15em .6em; color: var(--llm-chat-muted, #5f5f6b); }
.table-wrap { overflow-x: auto; }
.md table { border-collapse: collapse; }
.md th, .md td { border: 1px solid var(--llm-chat-rule, #d0d0d7); padding: .2em .5em; }
.md a { color: var(--llm-chat-link, #1f4fd1); }
.message .actions { display: flex; gap: .3rem; margin-top: .3rem; white-space: normal; }
.actions button, .code-bar button, .editing button, .storage button { font-size: .78em; padding: .1rem .5rem;
  background: transparent; color: inherit; border: 1px solid currentColor; opacity: .75; }
.log[aria-busy="true"] .regenerate, .log[aria-busy="true"] .edit, .log > li:not(:last-child) .regenerate { display: none; }
.editing textarea { width: 100%; box-sizing: border-box; color: var(--llm-chat-fg, #1d1d1f); }
.storage { padding: .5rem .8rem; font-size: .85em; border-bottom: 1px solid var(--llm-chat-rule, #ececf1); }
.storage[hidden] { display: none; }
.storage ul { margin: .3rem 0; padding-left: 1.1rem; }
.storage li { margin: .15rem 0; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
`;
