"""Add bytecode to pure-Python wheels, compiled by the interpreter that will run them: run inside Pyodide
(tools/build/build_web_dist.py does, through tools/build/pyodide_run.mjs) with the wheels' paths as arguments.

A page's Python otherwise compiles every module it imports from source at each start: llmchat, jinja2 and markupsafe
are ~0.5 s of a load on a laptop CPU. Each `x.py` gets `__pycache__/x.<cache tag>.pyc` beside it, hash-based and
unchecked (PEP 552): Pyodide unpacks a wheel without its files' times, so a timestamp-based .pyc would never match
and be compiled again. The .py files stay, for tracebacks. RECORD lists the new files.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import py_compile
import sys
import tempfile
import zipfile


def bytecode(source: bytes, name: str) -> bytes:
    """The unchecked hash-based .pyc of `source`, the module file `name` inside the wheel."""
    with tempfile.TemporaryDirectory() as scratch:
        src, pyc = os.path.join(scratch, "m.py"), os.path.join(scratch, "m.pyc")
        with open(src, "wb") as f:
            f.write(source)
        py_compile.compile(src, cfile=pyc, dfile=name, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        with open(pyc, "rb") as f:
            return f.read()


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def add_bytecode(wheel: str) -> int:
    """Rewrite `wheel` with a .pyc for each of its modules; returns how many were added (0 if it has them)."""
    with zipfile.ZipFile(wheel) as z:
        entries = [(info, z.read(info)) for info in z.infolist()]
    names = {info.filename for info, _ in entries}
    record = next(i for i, (info, _) in enumerate(entries) if info.filename.endswith(".dist-info/RECORD"))
    added = []
    for info, data in entries:
        if info.filename.endswith(".py") and ".dist-info/" not in info.filename:
            name = importlib.util.cache_from_source(info.filename)
            if name not in names:
                pyc = zipfile.ZipInfo(name, info.date_time)
                pyc.compress_type, pyc.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
                added.append((pyc, bytecode(data, info.filename)))
    if not added:
        return 0
    record_info, record_data = entries.pop(record)
    lines = record_data.decode().splitlines()
    own = [line for line in lines if line.startswith(record_info.filename + ",")]
    lines = [line for line in lines if line and line not in own] + [record_line(i.filename, d) for i, d in added] + own
    entries += added + [(record_info, ("\n".join(lines) + "\n").encode())]
    with zipfile.ZipFile(wheel + ".tmp", "w") as z:
        for info, data in entries:
            z.writestr(info, data)
    os.replace(wheel + ".tmp", wheel)
    return len(added)


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    for path in sys.argv[1:]:
        print(f"wheel_bytecode: {os.path.basename(path)}: {add_bytecode(path)} modules compiled "
              f"({sys.implementation.cache_tag})")
