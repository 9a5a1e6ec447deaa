// The storage panel of <llm-chat>: what this site stores (models with their sizes, kept conversation caches, the
// space left), each with a Delete button, and a "Try again" button, as DOM nodes for the element to show.

import { deleteConversations, deleteModel, listModels, storageEstimate } from "./stored-models.js";

// The panel's nodes. `warn(message)` hears a deletion that failed, `changed()` that something was deleted (the
// element shows the panel again), `retry()` that the visitor wants the model's load started over.
export async function storagePanel({ warn, changed, retry }) {
  const [models, estimate] = await Promise.all([listModels(), storageEstimate()]);
  const title = document.createElement("p");
  title.textContent = `Stored models: ${mib(estimate.models)}` + (estimate.quota !== null ?
    `; this site may store ${mib(estimate.free)} more (of ${mib(estimate.quota)}).` : ".");
  const list = document.createElement("ul");
  for (const model of models) {
    const item = document.createElement("li");
    const name = model.url.split("/").pop();
    item.textContent = `${name}: ${mib(model.stored)}${model.partial ? ` of ${mib(model.size)} (partial download)` :
      ""}${model.date ? `, ${model.date.slice(0, 10)}` : ""} `;
    item.title = model.url;
    item.append(button("delete-model", `Delete ${name}`, async () => {
      try {
        await deleteModel(model.url);
      } catch (error) {
        warn(error.message);
      }
      changed();
    }));
    list.append(item);
  }
  if (!models.length) list.textContent = "None.";
  const parts = [title, list];
  if (estimate.conversations) { // KV caches of kept conversations: computed again when needed, so they may go
    const line = document.createElement("p");
    line.textContent = `Kept conversation caches: ${mib(estimate.conversations)} `;
    line.append(button("delete-conversations", "Delete the kept conversation caches (the conversations stay)",
      async () => {
        await deleteConversations();
        changed();
      }));
    parts.push(line);
  }
  const again = document.createElement("button");
  again.type = "button";
  again.className = "retry";
  again.textContent = "Try again";
  again.addEventListener("click", retry);
  return [...parts, again];
}

// A Delete button that disables itself while `act` runs.
function button(className, label, act) {
  const remove = document.createElement("button");
  remove.type = "button";
  remove.className = className;
  remove.textContent = "Delete";
  remove.setAttribute("aria-label", label);
  remove.addEventListener("click", () => {
    remove.disabled = true;
    act();
  });
  return remove;
}

export function mib(bytes) {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}
