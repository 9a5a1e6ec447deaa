// Copy text to the clipboard, where the page may: the Clipboard API, else a hidden textarea and execCommand (pages
// outside a secure context, browsers that refuse the API), with the button that asked saying how it went.

// Resolves with whether the text was copied; `root` holds the hidden textarea meanwhile (a shadow root, say),
// `button` (optional) shows "Copied" or "Copy failed" for a moment.
export async function copyText(root, text, button = null) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.cssText = "position: fixed; opacity: 0; pointer-events: none;";
    root.append(area);
    area.select();
    try { ok = document.execCommand("copy"); } catch { ok = false; }
    area.remove();
  }
  if (button) {
    const label = button.textContent;
    button.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => { button.textContent = label; }, 1500);
  }
  return ok;
}
