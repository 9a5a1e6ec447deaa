"""`make demo`'s first step: the demo ends by serving on PORT, so a port another program holds is said before the
model is pulled and run, as one line naming the make variable that changes it, with status 2.

    python tools/build/port_free.py PORT
"""
from __future__ import annotations

import sys

from llmchat.errors import LLMChatError
from llmchat.server.connections import check_port


def main() -> int:
    port = sys.argv[1]
    try:
        check_port("127.0.0.1", int(port), option=f"make demo PORT={int(port) + 1}")
    except (LLMChatError, ValueError) as exc:
        print(f"llmchat: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
