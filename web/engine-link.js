// How a page reaches the worker that runs its model (worker.js): its own worker, or the one worker that every tab
// of this origin asking for the same model shares.
//
// Sharing elects one tab with a Web Lock held for its life (navigator.locks); that tab runs the worker and relays
// the other tabs' messages to it over a BroadcastChannel, one MessagePort each, so the worker serves every tab the
// same way. When that tab closes, its lock passes to a waiting tab, which starts the worker again (the model comes
// from OPFS, not the network) and says so on the channel; every tab then joins it anew (`onLeader`). Conversations
// live in the tabs (each request carries its messages), so nothing is lost but the KV cache, which the next request
// fills again (or reads back from OPFS, when it carries a prompt_cache_key).
//
// A SharedWorker would spare the relay, and Chromium does expose WebGPU in one, but a shared worker has neither
// OPFS sync access handles (model-store.js writes through them: resumable downloads in place) nor nested workers.
//
// A link: post(message, transfer), close(), sharing ("leader-tab" | "private"), reason, leader (this tab runs the
// worker); it calls onMessage(message) for what the worker says and onLeader() when a new tab took the engine over.

import { MSG } from "./messages.js";

export function connect({ workerURL, key, shared, onMessage, onLeader }) {
  const why = shared === false ? "shared: false was asked for"
    : !globalThis.navigator?.locks?.request ? "this browser has no Web Locks (navigator.locks)"
    : typeof BroadcastChannel !== "function" ? "this browser has no BroadcastChannel"
    : null;
  if (why) return new PrivateLink(workerURL, onMessage, `${why}: this tab runs an engine of its own`);
  return new TabLink(workerURL, key, onMessage, onLeader);
}

function startWorker(workerURL, onMessage) {
  const worker = new Worker(workerURL, { type: "module", name: "llmchat" });
  worker.onmessage = ({ data }) => onMessage(data);
  worker.onerror = (event) => onMessage({ type: MSG.error, code: "worker", message: event.message || "worker failed" });
  return worker;
}

class PrivateLink {
  constructor(workerURL, onMessage, reason) {
    this.sharing = "private";
    this.reason = reason;
    this.leader = true;
    this.worker = startWorker(workerURL, onMessage);
  }

  post(message) {
    this.worker.postMessage(message);
  }

  close() {
    this.worker.terminate();
  }
}

class TabLink {
  constructor(workerURL, key, onMessage, onLeader) {
    this.sharing = "leader-tab";
    this.reason = "one tab of this site runs the engine; the others use it through a BroadcastChannel (Web Locks " +
      "elect that tab, and another takes over when it closes)";
    this.leader = false;
    this.workerURL = workerURL;
    this.onMessage = onMessage;
    this.onLeader = onLeader;
    this.id = crypto.randomUUID();
    this.name = `llmchat-engine:${key}`;
    this.channel = new BroadcastChannel(this.name);
    this.channel.onmessage = ({ data }) => this.#heard(data);
    this.ports = new Map(); // the other tabs' ids → the ports the worker serves them on (while this tab leads)
    this.released = new Promise((resolve) => { this.release = resolve; });
    this.closed = false;
    this.outbox = []; // what the engine said before this tab knew whether it leads
    this.bye = (event) => { if (!event.persisted) this.close(); };
    addEventListener("pagehide", this.bye);
    // Lead at once if no tab does; otherwise queue for the lock, which comes when every tab before this one closed.
    navigator.locks.request(this.name, { ifAvailable: true }, (lock) => {
      const held = lock ? this.#lead() : null;
      const waiting = this.outbox;
      this.outbox = null;
      for (const message of waiting) this.post(message);
      if (!lock && !this.closed) navigator.locks.request(this.name, () => this.#lead(true));
      return held;
    });
  }

  #lead(takeover = false) {
    if (this.closed) return null;
    this.leader = true;
    this.worker = startWorker(this.workerURL, this.onMessage);
    this.channel.postMessage({ type: MSG.leader });
    if (takeover) this.onLeader();
    return this.released; // the lock is held until this tab closes or its engine is terminated
  }

  #heard(data) {
    if (data.type === MSG.leader) return this.onLeader();
    if (data.to === this.id) return this.onMessage(data.message);
    if (data.to !== MSG.leader || !this.leader) return;
    let port = this.ports.get(data.from);
    if (!port) {
      const channel = new MessageChannel();
      port = channel.port1;
      port.onmessage = ({ data: message }) => this.channel.postMessage({ to: data.from, message });
      this.worker.postMessage({ type: MSG.connect, port: channel.port2 }, [channel.port2]);
      this.ports.set(data.from, port);
    }
    port.postMessage(data.message);
    if (data.message.type === MSG.bye) {
      port.close();
      this.ports.delete(data.from);
    }
  }

  post(message) {
    if (this.outbox) this.outbox.push(message);
    else if (this.leader) this.worker.postMessage(message);
    else this.channel.postMessage({ to: MSG.leader, from: this.id, message });
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    removeEventListener("pagehide", this.bye);
    if (this.leader) {
      this.worker.terminate();
      this.release(); // the next tab in line takes over
    } else {
      this.post({ type: MSG.bye });
    }
    this.channel.close();
  }
}
