"""Unpack llama.cpp's tokenizer test vocabularies (`models/ggml-vocab-*.gguf` with their `.inp`/`.out` cases) from
the llama-cpp-python 0.3.36 source distribution into `$LLMCHAT_HOME/llama.cpp-vocabs` (default
~/.cache/llmchat/llama.cpp-vocabs), where tests/unit/test_tokenizer_llama_vocabs.py looks for them.

    .venv/bin/python tools/build/fetch_llama_vocabs.py [--sdist llama_cpp_python-0.3.36.tar.gz] [--if-missing]

Without --sdist, your pip downloads the source distribution (tools/build/pypi_sdist.py). About 60 MB of
vocabularies are written.
"""
from __future__ import annotations

import sys
import tarfile
from pathlib import Path

from llmchat.paths import llmchat_home
from pypi_sdist import fetch

VERSION = "0.3.36"
PREFIX = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/models/"


def vocab_dir() -> Path:
    return llmchat_home() / "llama.cpp-vocabs"


def unpack(sdist: Path, target: Path) -> list[str]:
    target.mkdir(parents=True, exist_ok=True)
    names = []
    with tarfile.open(sdist) as archive:
        for member in archive:
            name = member.name
            if not (name.startswith(PREFIX) and member.isfile()):
                continue
            leaf = name[len(PREFIX):]
            if "/" in leaf or not leaf.startswith("ggml-vocab-"):
                continue
            source = archive.extractfile(member)
            assert source is not None
            part = target / (leaf + ".part")
            part.write_bytes(source.read())
            part.replace(target / leaf)
            names.append(leaf)
    return names


def main() -> int:
    names = fetch(__doc__.splitlines()[0], f"llama-cpp-python=={VERSION}", f"llama_cpp_python-{VERSION}.tar.gz",
                  vocab_dir(), unpack)
    if names is not None:
        print(f"{vocab_dir()}: {len(names)} files ({sum(n.endswith('.gguf') for n in names)} vocabularies)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
