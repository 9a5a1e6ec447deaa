// What a completion request that leaves a field out gets in the browser, on the device and through an endpoint
// alike (web/engine.js fills them in before a request goes either way), so the same call answers the same in both
// modes: greedy decoding, as llmchat's CLI and Python API, and a reply bounded for a device that may write a few
// tokens a second (OpenAI's servers default to temperature 1 and a reply as long as the context allows).
export const REQUEST_DEFAULTS = Object.freeze({ temperature: 0, max_tokens: 256 });

// `params` with REQUEST_DEFAULTS for the fields it leaves out (absent or null); a chat request's
// max_completion_tokens stands for max_tokens.
export function withDefaults(params) {
  const filled = { ...params };
  filled.temperature ??= REQUEST_DEFAULTS.temperature;
  if (filled.max_tokens == null && filled.max_completion_tokens == null) {
    filled.max_tokens = REQUEST_DEFAULTS.max_tokens;
  }
  return filled;
}
