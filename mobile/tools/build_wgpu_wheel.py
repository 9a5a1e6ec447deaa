"""Build the pure-Python wgpu wheel the phone apps install (wgpu-py publishes wheels for desktops only).

    python mobile/tools/build_wgpu_wheel.py [--version 0.32.0] [--out mobile/wheels]

It fetches wgpu's source distribution from the package index with pip, trims its dependencies to what compute
needs (cffi, and rubicon-objc on macOS where wgpu imports it; rendercanvas only serves windows and canvases), and
builds a py3-none-any wheel without the wgpu-native library: the app bundles the phone's own build of it and
points WGPU_LIB_PATH there (llmchat_app.platform). The version defaults to the wgpu installed beside this Python,
so the app runs the wgpu the core was tested with.

What wgpu's build does (tools/hatch_build.py in its sdist, 0.32): a wheel built from the sdist (no .git) is
already left pure; WGPU_PY_BUILD_NOARCH=1 makes that explicit and stops tools/download_wgpu_native.py from
importing `requests` (it would otherwise fetch a library from GitHub in a git checkout). The tool checks the
result: the tag, no .so/.dll/.dylib inside, and the trimmed Requires-Dist.
"""
from __future__ import annotations

import argparse
import email.parser
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

KEEP = {"cffi", "rubicon-objc"}  # what `import wgpu` and compute need; nothing else survives the trim
LIBRARIES = (".so", ".dll", ".dylib")


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def trim_dependencies(pyproject: Path) -> list[str]:
    """Rewrite [project].dependencies to the KEEP set and drop the optional extras (tests, docs, examples: numpy,
    rendercanvas...); returns what was kept."""
    text = re.sub(r"^\[project\.optional-dependencies\]\n.*?(?=^\[)", "", pyproject.read_text(), flags=re.S | re.M)
    deps = tomllib.loads(text)["project"]["dependencies"]
    kept = [d for d in deps if requirement_name(d) in KEEP]
    block = re.search(r"^dependencies\s*=\s*\[.*?^\]", text, flags=re.S | re.M)
    if block is None:
        raise SystemExit(f"{pyproject}: no dependencies list to trim (the sdist's layout changed)")
    new = "dependencies = [\n" + "".join(f"    {json.dumps(d)},\n" for d in kept) + "]"
    pyproject.write_text(text[:block.start()] + new + text[block.end():])
    project = tomllib.loads(pyproject.read_text())["project"]
    if project["dependencies"] != kept or "optional-dependencies" in project:
        raise SystemExit(f"{pyproject}: trimming the dependencies failed")
    return kept


def check_wheel(wheel: Path, kept: list[str]) -> dict:
    if not wheel.name.endswith("-py3-none-any.whl"):
        raise SystemExit(f"{wheel.name}: not a pure-Python wheel")
    with zipfile.ZipFile(wheel) as z:
        libraries = [n for n in z.namelist() if n.endswith(LIBRARIES)]
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(z.read(meta_name).decode())
    if libraries:
        raise SystemExit(f"{wheel.name} carries native libraries: {libraries}")
    requires = meta.get_all("Requires-Dist") or []
    if sorted(map(requirement_name, requires)) != sorted(map(requirement_name, kept)) or any(
            "extra" in r for r in requires):
        raise SystemExit(f"{wheel.name}: Requires-Dist is {requires}, expected {kept}")
    return {"wheel": str(wheel), "requires": requires, "version": meta["Version"]}


def build(version: str, out: Path, pip: list[str] | None = None) -> dict:
    pip = pip or [sys.executable, "-m", "pip"]
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="wgpu-sdist-") as work:
        work = Path(work)
        subprocess.run([*pip, "download", "--quiet", "--no-binary", ":all:", "--no-deps", f"wgpu=={version}",
                        "-d", str(work)], check=True)
        sdist = next(work.glob("wgpu-*.tar.gz"))
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        source = work / sdist.name.removesuffix(".tar.gz")
        kept = trim_dependencies(source / "pyproject.toml")
        env = {**os.environ, "WGPU_PY_BUILD_NOARCH": "1"}
        subprocess.run([*pip, "wheel", "--quiet", "--no-deps", "-w", str(out), str(source)], check=True, env=env)
    return check_wheel(out / f"wgpu-{version}-py3-none-any.whl", kept)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=metadata.version("wgpu"), help="wgpu version (default: the installed one)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "wheels")
    args = parser.parse_args(argv)
    result = build(args.version, args.out)
    print(f"built {result['wheel']} (Requires-Dist: {', '.join(result['requires'])})")


if __name__ == "__main__":
    main()
