"""Shared by the app's tests: the app's sources on the import path, and a local model mirror: the browser tests'
server (HTTP Range, a connection cut once mid-file the way a phone's network drops, a log of what was asked and
sent), serving the model's folder at /models/."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

from browser_server import WebServer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mobile" / "src"))


@contextmanager
def model_mirror(model: Path, cut_at: int):
    """A server of `model`'s folder whose first response covering byte `cut_at` of a model is cut there."""
    with WebServer(ROOT / "web", model.parent) as server:
        server.faults.drop_model_at = cut_at
        yield server


def mirror_url(server: WebServer) -> str:
    return f"{server.url}/models"
