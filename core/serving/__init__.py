"""Serving many requests on one model, without a web framework: the scheduler (continuous batching around
llmchat.runtime.generation's loop, chunked prefill, cancellation), the prefix cache (finished sequences' KV kept and
shared by later prompts) and the metrics they keep. The HTTP server (llmchat.server) and the Python API
(`LLM.scheduler`) both use them; llmchat.runtime keeps the model on a device."""
