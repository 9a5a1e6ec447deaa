// Conversations of <llm-chat> kept per origin, so that a reload finds them (opt out: persist="false").
//
// localStorage rather than IndexedDB: a conversation is a few kilobytes of text read once at start and written once
// per turn, and a synchronous read lets the element show it before anything else has loaded. The browser gives
// each origin about 5 MiB of it; a save that does not fit is reported, never dropped silently.

const PREFIX = "llmchat-chat:";

// One conversation per page path, element (its id, else its position among the page's <llm-chat>) and model.
export function conversationKey(element, model) {
  const position = [...document.querySelectorAll("llm-chat")].indexOf(element);
  return `${PREFIX}${location.pathname}#${element.id || `#${position}`}:${model}`;
}

export function loadConversation(key) {
  try {
    const saved = JSON.parse(globalThis.localStorage?.getItem(key) ?? "null");
    return Array.isArray(saved?.messages) ? saved.messages.filter(isMessage) : [];
  } catch {
    return [];
  }
}

// Returns null when saved, else the error (storage full or disabled).
export function saveConversation(key, messages) {
  try {
    if (!messages.length) globalThis.localStorage?.removeItem(key);
    else globalThis.localStorage?.setItem(key, JSON.stringify({ version: 1, saved: Date.now(), messages }));
    return null;
  } catch (error) {
    return error;
  }
}

function isMessage(m) {
  return m && typeof m === "object" && ["user", "assistant", "tool"].includes(m.role) &&
    (typeof m.content === "string" || m.content === null);
}
