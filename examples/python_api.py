#!/usr/bin/env python3
"""A two-turn chat on the Python API, streamed to the terminal: the model runs on this machine's GPU (wgpu).

    python examples/python_api.py                      # SmolLM2 from the catalogue (pulled on first use)
    python examples/python_api.py MODEL -n 64          # any GGUF path, URL or Hugging Face reference
"""
import argparse
import sys

from llmchat import load


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="smollm2")
    parser.add_argument("-n", "--max-tokens", type=int, default=64)
    args = parser.parse_args()

    llm = load(args.model, context=512)
    messages = [{"role": "system", "content": "You are a helpful assistant."}]
    for question in ("What is the capital of France?", "And of Italy?"):
        messages.append({"role": "user", "content": question})
        print(f"> {question}")
        reply = ""
        for event in llm.chat(messages, max_tokens=args.max_tokens):
            reply += event.text
            print(event.text, end="", flush=True)
        # The second turn reuses the first one's KV cache: only the new message is computed.
        print(f"\n[{event.finish_reason}; {event.usage['completion_tokens']} tokens]")
        messages.append({"role": "assistant", "content": reply})
    return 0


if __name__ == "__main__":
    sys.exit(main())
