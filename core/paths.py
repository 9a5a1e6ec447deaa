"""Where llmchat keeps what it caches on this machine (models, tuning results, benchmark files): below every
package that caches something, so the tuner and the hub read one rule."""
from __future__ import annotations

import os
from pathlib import Path


def llmchat_home() -> Path:
    """The root of everything llmchat caches: `$LLMCHAT_HOME`, else `~/.cache/llmchat`."""
    configured = os.environ.get("LLMCHAT_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "llmchat"
