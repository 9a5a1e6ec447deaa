// The messages between a page's engine (engine.js), the worker that runs the model (worker.js) and the other tabs
// that share it (engine-link.js), by name: each side builds and reads them with these, never with string literals
// of its own. worker.js's header says what each one carries.

export const MSG = Object.freeze({
  // a tab to the worker
  load: "load", chat: "chat", stop: "stop", reset: "reset", forget: "forget", stats: "stats", sweep: "sweep",
  connect: "connect", bye: "bye",
  // the worker to a tab (the answers to forget, stats and sweep come under those names)
  status: "status", progress: "progress", warning: "warning", ready: "ready", chunk: "chunk", done: "done",
  error: "error",
  // between tabs, on the site's BroadcastChannel: the tab that runs the worker, and what is sent to it
  leader: "leader",
});
