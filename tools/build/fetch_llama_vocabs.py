"""Unpack llama.cpp's tokenizer test vocabularies (`models/ggml-vocab-*.gguf` with their `.inp`/`.out` cases) from
the llama-cpp-python 0.3.36 source distribution into `$LLMCHAT_HOME/llama.cpp-vocabs` (default
~/.cache/llmchat/llama.cpp-vocabs), where tests/unit/test_tokenizer_llama_vocabs.py looks for them.

    .venv/bin/python tools/build/fetch_llama_vocabs.py [--sdist llama_cpp_python-0.3.36.tar.gz] [--if-missing]

Without --sdist, your pip downloads the source distribution (`pip download --no-deps --no-binary :all:`), so your
index, proxy and cache apply. About 60 MB of vocabularies are written.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from llmchat.paths import llmchat_home

VERSION = "0.3.36"
PREFIX = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/models/"
COMPLETE = ".complete"  # written last: names the version whose files are all there


def vocab_dir() -> Path:
    return llmchat_home() / "llama.cpp-vocabs"


def download(dest: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    f"llama-cpp-python=={VERSION}", "--dest", str(dest)], check=True)
    found = sorted(dest.glob(f"llama_cpp_python-{VERSION}.tar.gz"))
    if not found:
        raise SystemExit(f"pip did not leave llama_cpp_python-{VERSION}.tar.gz in {dest}")
    return found[0]


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", type=Path, help="an already downloaded llama_cpp_python source archive")
    parser.add_argument("--if-missing", action="store_true", help="do nothing when this version is already unpacked")
    args = parser.parse_args()
    stamp = vocab_dir() / COMPLETE
    if args.if_missing and stamp.is_file() and stamp.read_text().strip() == VERSION:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        sdist = args.sdist or download(Path(tmp))
        names = unpack(sdist, vocab_dir())
    stamp.write_text(VERSION + "\n")
    print(f"{vocab_dir()}: {len(names)} files ({sum(n.endswith('.gguf') for n in names)} vocabularies)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
