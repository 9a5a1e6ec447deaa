"""`llmchat pull URL`: a whole GGUF file (every shard of a split one) from an HTTP(S) server into the models directory.

Bytes come through `HTTPSource`, the same Range reader that streams a model, in large chunks: its retries resume a
dropped connection at the chunk that broke, and it notices a file that changes on the server mid-download. The file
appears under its name only once complete (an atomic rename). The local copy mirrors the URL
(`models/url/<host>/<path>`), so two servers' files of the same name never collide and `llmchat rm URL` finds it.
"""
from __future__ import annotations

import os
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import IO

from ..errors import ModelNotFoundError
from ..gguf.file import shard_name, shard_number
from ..gguf.sources import HTTPSource, host_and_port, split_credentials

CHUNK = 16 << 20  # per request: small enough that a cut connection costs little, large enough to stream fast


def shard_urls(url: str) -> list[str]:
    """The URL itself, or every shard's URL when it names one shard of a split model."""
    position = shard_number(url)
    if position is None:
        return [url]
    return [name for index in range(position[1]) if (name := shard_name(url, index, position[1])) is not None]


def local_path(url: str, models: Path) -> Path:
    """Where the pulled copy of `url` lives (credentials in the URL play no part)."""
    public, _ = split_credentials(url)
    parts = urllib.parse.urlsplit(public)
    segments = [urllib.parse.unquote(s) for s in parts.path.split("/") if s]
    if not segments or not segments[-1].lower().endswith(".gguf"):
        raise ModelNotFoundError(f"{public}: `llmchat pull` takes the URL of a .gguf file")
    if any(s in (".", "..") or "/" in s or os.sep in s or "\0" in s for s in segments):
        raise ModelNotFoundError(f"{public}: the path cannot be mirrored safely into the model cache")
    return models.joinpath("url", host_and_port(parts).replace(":", "_"), *segments)


def cached_files(url: str, models: Path) -> list[Path]:
    return [local_path(u, models) for u in shard_urls(url)]


def pull_url(url: str, models: Path, out: IO[str] | None = None) -> Path:
    """Download `url` (and its sibling shards) unless a complete copy of the same size is cached; return the path
    of the first file."""
    out = sys.stderr if out is None else out
    paths = []
    for shard in shard_urls(url):
        target = local_path(shard, models)
        paths.append(target)
        with HTTPSource(shard, block_size=1 << 16) as source:
            if target.is_file() and target.stat().st_size == source.size:
                continue
            _fetch(source, target, out)
    return paths[0]


def _fetch(source: HTTPSource, target: Path, out: IO[str]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"llmchat: downloading {source.url} ({source.size / 1e6:.1f} MB) to {target}", file=out, flush=True)
    live = out.isatty() if hasattr(out, "isatty") else False
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".partial",
                                     delete=False) as sink:
        try:
            for offset in range(0, source.size, CHUNK):
                sink.write(source.read(offset, min(CHUNK, source.size - offset)))
                if live:
                    done = min(offset + CHUNK, source.size)
                    out.write(f"\r  {done / source.size:6.1%}  {done / 1e6:,.1f} / {source.size / 1e6:,.1f} MB")
                    out.flush()
            sink.flush()
            os.fsync(sink.fileno())
        except BaseException:
            sink.close()
            os.unlink(sink.name)
            raise
    if live:
        out.write("\n")
    os.replace(sink.name, target)
