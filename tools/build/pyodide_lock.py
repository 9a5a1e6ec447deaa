"""Add pure-Python wheels to a Pyodide lock file (pyodide-lock.json), with the standard library alone.

Pyodide installs a package only through its lock file, which names each wheel's file, sha256, import names and
dependencies. The format is small (pyodide-lock's PackageSpec): per package `name` (canonical), `version`,
`file_name`, `install_dir` ("site"), `sha256`, `package_type` ("package"), `imports`, `depends` (canonical names),
`unvendored_tests` and `tool`. This writes the same entries `pyodide lockfile add-wheels` (pyodide-build) writes,
byte for byte, without its Python >= 3.12 requirement, so the web build runs with the project's own interpreter
(tests/unit/test_pyodide_lock.py checks both claims).

    python tools/build/pyodide_lock.py --input node_modules/pyodide/pyodide-lock.json --output OUT.json WHEEL...
"""
from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import re
import zipfile
from pathlib import Path


class LockError(Exception):
    """A wheel cannot go into the lock file (not pure Python, or a dependency the lock does not have)."""


def canonical(name: str) -> str:
    """PEP 503's normalized name, the lock file's key."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _marker_holds(marker: str, python: str) -> bool:
    """Whether a Requires-Dist marker holds inside Pyodide (no extra selected). Uses `packaging` (pip and
    setuptools both carry a copy) to evaluate it as the packaging tools do."""
    try:
        from packaging.markers import Marker
    except ImportError:  # pragma: no cover - a bare interpreter: pip's vendored copy
        from pip._vendor.packaging.markers import Marker
    major_minor = ".".join(python.split(".")[:2])
    env = {"sys_platform": "emscripten", "platform_system": "Emscripten", "os_name": "posix",
           "platform_machine": "wasm32", "python_version": major_minor, "python_full_version": python,
           "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
    return Marker(marker).evaluate(env)


def _metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
    return email.parser.Parser().parsestr(wheel.read(name).decode("utf-8"))


def _imports(wheel: zipfile.ZipFile) -> list[str]:
    """The top-level import names: top_level.txt when the wheel has one, else its top-level packages and modules."""
    names = wheel.namelist()
    top_level = [n for n in names if n.endswith(".dist-info/top_level.txt") and n.count("/") == 1]
    if top_level:
        return sorted({line.strip() for line in wheel.read(top_level[0]).decode().splitlines() if line.strip()})
    found = set()
    for name in names:
        head, sep, _ = name.partition("/")
        if head.endswith((".dist-info", ".data")):
            continue
        if sep and name == f"{head}/__init__.py":
            found.add(head)
        elif not sep and name.endswith(".py"):
            found.add(name[:-3])
    return sorted(found)


def _requirement_name(requirement: str) -> str:
    return re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)


def wheel_entry(path: Path, python: str) -> dict:
    """The lock entry of one pure wheel; `python` is the lock's Python version (its `info.python`)."""
    if not path.name.endswith("-none-any.whl"):
        raise LockError(f"{path.name} is not a pure-Python wheel; Pyodide cannot load it from this lock")
    with zipfile.ZipFile(path) as wheel:
        meta = _metadata(wheel)
        imports = _imports(wheel)
    depends = []
    for requirement in meta.get_all("Requires-Dist") or []:
        spec, _, marker = requirement.partition(";")
        if marker.strip() and not _marker_holds(marker.strip(), python):
            continue
        depends.append(canonical(_requirement_name(spec)))
    return {"depends": sorted(set(depends)), "file_name": path.name, "imports": imports, "install_dir": "site",
            "name": canonical(meta["Name"]), "package_type": "package",
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "tool": {}, "unvendored_tests": False,
            "version": meta["Version"]}


def add_wheels(lock: dict, wheels: list[Path]) -> dict:
    """A copy of `lock` with `wheels` added (replacing packages of the same name); each dependency must be in it."""
    packages = dict(lock["packages"])
    for wheel in wheels:
        entry = wheel_entry(wheel, lock["info"]["python"])
        packages[entry["name"]] = entry
    for entry in packages.values():
        missing = [d for d in entry["depends"] if d not in packages]
        if missing and entry["file_name"] in {w.name for w in wheels}:
            raise LockError(f"{entry['file_name']} depends on {missing}, which the lock file does not have")
    return {**lock, "packages": dict(sorted(packages.items()))}


def write(lock: dict, path: Path) -> None:
    path.write_text(json.dumps(lock, sort_keys=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True, help="the lock file to start from (Pyodide's own)")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("wheels", type=Path, nargs="+")
    args = parser.parse_args()
    write(add_wheels(json.loads(args.input.read_text()), args.wheels), args.output)


if __name__ == "__main__":
    main()
