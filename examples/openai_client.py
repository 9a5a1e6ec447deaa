#!/usr/bin/env python3
"""The official `openai` client against `llmchat serve`: a streamed chat reply, then a whole one.

    llmchat serve smollm2 &                               # the server, on http://127.0.0.1:8000/v1
    pip install openai
    python examples/openai_client.py                      # or --base-url http://HOST:PORT/v1

With `llmchat serve --api-key KEY`, pass the same key with --api-key (or set OPENAI_API_KEY).
"""
import argparse
import os
import sys

from openai import OpenAI


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "unused"))
    parser.add_argument("-n", "--max-tokens", type=int, default=64)
    args = parser.parse_args()

    client = OpenAI(base_url=args.base_url, api_key=args.api_key)
    model = client.models.list().data[0].id  # the server runs one model
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What is the capital of France?"}]

    # Greedy, like the CLI, the Python API and the page: OpenAI's default temperature (1.0) makes a model this small
    # wander off the answer.
    settings = dict(max_tokens=args.max_tokens, temperature=0)

    print(f"{model} (streamed): ", end="", flush=True)
    stream = client.chat.completions.create(model=model, messages=messages, stream=True, **settings)
    for chunk in stream:
        if chunk.choices:
            print(chunk.choices[0].delta.content or "", end="", flush=True)
    print()

    reply = client.chat.completions.create(model=model, messages=messages, **settings)
    print(f"{model} (whole): {reply.choices[0].message.content}")
    print(f"[{reply.choices[0].finish_reason}; {reply.usage.completion_tokens} tokens]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
