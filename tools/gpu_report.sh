#!/usr/bin/env bash
# The speed report for a machine with a Vulkan GPU, from files carried there (no network needed): the roofline report
# (`llmchat bench --roofline`) and decode/prefill speed on random-weight 1B-class models (tools/bench/make_bench_gguf.py),
# natively through wgpu, written as one JSON file, in under 8 minutes.
#
#   tools/gpu_report.sh --prepare [DIR]      here, with network: wheels and the Vulkan loader package into DIR
#                                            (default .gpu_carry, which .gitignore keeps out of commits)
#   tools/gpu_report.sh [options]            there, from the repository's root, with DIR carried along
#
# Options: --carry DIR (default .gpu_carry); --out FILE (default $OUT/gpu_report.json when $OUT is set, else
# gpu_report.json); --shapes "llama-3.2-1b ..." and --types "Q4_0 Q4_K_M" (the models); --tokens N (generated per
# bench run, default 64) and --repeat N (runs, default 2); --budget SECONDS (default 450: benches that would start
# later are skipped and listed as such); --python-version X.Y with --prepare (default 3.12: the target's Python,
# which the compiled wheels must match).
#
# Without a GPU the adapter is whatever wgpu finds (lavapipe where Mesa's Vulkan drivers are installed); the JSON
# records it, with `software: true` for CPU emulations.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=.gpu_carry
OUTFILE=${OUT:+$OUT/gpu_report.json}
OUTFILE=${OUTFILE:-gpu_report.json}
SHAPES="llama-3.2-1b"
TYPES="Q4_0 Q4_K_M"
TOKENS=64
REPEAT=2
BUDGET=450
PYVER=3.12
PREPARE=""
PROMPT="The history of the city of Paris begins with a Celtic tribe"
PY=${PYTHON:-python3}  # with --prepare only its pip is used (to download), and the wgpu version it has is pinned

die() { echo "gpu_report: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prepare) PREPARE=1; if [ $# -gt 1 ] && [ "${2#--}" = "$2" ]; then CARRY=$2; shift; fi ;;
    --carry) CARRY=$2; shift ;;
    --out) OUTFILE=$2; shift ;;
    --shapes) SHAPES=$2; shift ;;
    --types) TYPES=$2; shift ;;
    --tokens) TOKENS=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --budget) BUDGET=$2; shift ;;
    --python-version) PYVER=$2; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift
done
cd "$ROOT"

# Wheels of the packages llmchat needs at run time for the bench, and the tools' numpy and gguf, for one Python
# version on x86-64 Linux; the loader of Vulkan from Debian. llmchat itself runs from this checkout.
prepare() {
  local dir=$1 wheels=$1/wheels debs=$1/debs
  mkdir -p "$wheels" "$debs"
  local wgpu_version
  wgpu_version=$("$PY" -m pip show wgpu 2>/dev/null | sed -n 's/^Version: //p' || true)
  "$PY" -m pip download --quiet --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$wheels" "wgpu${wgpu_version:+==$wgpu_version}" jinja2 gguf==0.19.0 numpy
  local apt=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu_report_apt_lists)
  mkdir -p /tmp/gpu_report_apt_lists/partial
  if ! ls "$debs"/libvulkan1_*.deb >/dev/null 2>&1; then
    apt-get "${apt[@]}" update >/dev/null 2>&1 || true
    (cd "$debs" && apt-get "${apt[@]}" download libvulkan1 >/dev/null) || die "apt-get download libvulkan1 failed"
  fi
  du -sh "$dir"
  ls "$wheels" "$debs"
}

if [ -n "$PREPARE" ]; then
  prepare "$CARRY"
  exit 0
fi

START=$(date +%s)
[ -d "$CARRY/wheels" ] || die "no $CARRY/wheels: run tools/gpu_report.sh --prepare $CARRY where pip can download"
WORK=$(mktemp -d /tmp/gpu_report.XXXXXX)
mkdir -p "$WORK/site" "$WORK/runs" "$WORK/pkg/llmchat"

# Python packages: the carried wheels, unpacked into a folder of our own (no virtual environment needed).
if "$PY" -m pip --version >/dev/null 2>&1; then
  PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" "$CARRY"/wheels/*.whl \
    || die "installing the carried wheels failed: were they prepared for this Python ($("$PY" -V))? --python-version"
else  # a wheel of these packages is a zip of what goes into site-packages
  for w in "$CARRY"/wheels/*.whl; do "$PY" -m zipfile -e "$w" "$WORK/site"; done
fi
# llmchat from this checkout, laid out as its wheel lays it out (pyproject's package-dir).
for entry in core/*; do ln -s "$ROOT/$entry" "$WORK/pkg/llmchat/"; done
for sub in quant shaders web; do ln -s "$ROOT/$sub" "$WORK/pkg/llmchat/$sub"; done
export PYTHONPATH="$WORK/pkg:$WORK/site${PYTHONPATH:+:$PYTHONPATH}"

# The Vulkan loader, when the system has none: the carried Debian package, unpacked into our folder.
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
  for deb in "$CARRY"/debs/*.deb; do [ -e "$deb" ] && dpkg -x "$deb" "$WORK/root"; done
  [ -d "$WORK/root" ] && export LD_LIBRARY_PATH="$WORK/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# NVIDIA's driver mounted outside the standard places (containers): point the loader at its manifest.
if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* \
    >/dev/null 2>&1 && [ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}

"$PY" -c 'import json; from llmchat.gpu.native import NativeDevice; print(json.dumps(NativeDevice().info.as_dict()))' \
  > "$WORK/adapter.json" 2> "$WORK/adapter.err" || true

# The models, then one bench per model while the budget lasts.
MODELS=()
if [ -s "$WORK/adapter.json" ]; then
  for shape in $SHAPES; do
    for type in $TYPES; do
      path=$("$PY" tools/bench/make_bench_gguf.py --shape "$shape" --type "$type" | tail -1 | cut -d' ' -f1) \
        || die "tools/bench/make_bench_gguf.py failed for $shape $type"
      MODELS+=("$path")
    done
  done
fi
for path in "${MODELS[@]}"; do
  name=$(basename "$path" .gguf)
  left=$((BUDGET - ($(date +%s) - START)))
  if [ "$left" -lt 30 ]; then echo '{"skipped": "the time budget was spent"}' > "$WORK/runs/$name.json"; continue; fi
  echo "gpu_report: $name (${left}s of the budget left)" >&2
  timeout "$left" "$PY" -m llmchat bench "$path" --json --roofline -n "$TOKENS" --repeat "$REPEAT" -p "$PROMPT" \
    > "$WORK/runs/$name.json" 2> "$WORK/runs/$name.err" || true
done

"$PY" - "$WORK" "$OUTFILE" "$START" "$BUDGET" <<'EOF'
import json, os, platform, subprocess, sys, time
from pathlib import Path

work, out, start, budget = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def command(*args):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def last_json(path):
    lines = path.read_text().strip().splitlines() if path.exists() else []
    try:
        return json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None


def wgpu_version():
    try:
        import wgpu
        return wgpu.__version__
    except Exception as exc:  # reported, not fatal: the adapter error says more
        return f"unavailable: {exc}"


cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
            if l.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else None
report = {"machine": {"host": platform.node(), "system": platform.platform(), "cpu": cpu, "cores": os.cpu_count(),
                      "nvidia_smi": command("nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                            "--format=csv,noheader")},
          "python": platform.python_version(), "wgpu": wgpu_version(), "adapter": last_json(work / "adapter.json")}
if report["adapter"] is None:
    report["error"] = "no WebGPU adapter: " + (work / "adapter.err").read_text()[-2000:]
runs = []
for result in sorted((work / "runs").glob("*.json")):
    data = last_json(result)
    err = result.with_suffix(".err")
    run = {"model": result.stem, "result": data}
    if data is None:
        run["error"] = (err.read_text()[-2000:] if err.exists() else "") or "no output (timed out?)"
    runs.append(run)
report["runs"] = runs
# The headline figures, per model: speeds and how much of the read bandwidth the weight stream reaches.
summary = {}
for run in runs:
    r = run["result"] or {}
    roof = r.get("roofline") or {}
    if "decode_tok_s" in r:
        summary[run["model"]] = {
            "decode_tok_s": round(r["decode_tok_s"], 2), "prefill_tok_s": round(r["prefill_tok_s"], 2),
            "read_gb_s": roof.get("bandwidth", {}).get("read_gb_s"),
            "step_weight_fraction": roof.get("step", {}).get("weight_fraction"),
            "decode_weight_fraction": roof.get("decode", {}).get("weight_fraction")}
report["summary"] = summary
report["seconds"] = round(time.time() - start, 1)
report["budget_s"] = budget
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps(report, indent=1))
print(json.dumps({"out": str(out), "adapter": (report["adapter"] or {}).get("name"), "summary": summary,
                  "seconds": report["seconds"]}))
EOF
rm -rf "$WORK"
