#!/usr/bin/env bash
# Install the Debian/Ubuntu packages a set of llmchat's commands needs, skipping those already installed, so a
# repeated run costs a few dpkg queries. Other systems are left alone (wgpu uses Metal, D3D12 or the installed
# Vulkan driver there).
#   system-deps.sh [--list] SET
#   SET     demo: what `make demo` runs (the Vulkan loader and lavapipe, the web build's node and npm, venv);
#           test: that and what the test suite drives as well (Chromium, the native app's build packages)
#   --list  print the set's packages, one a line, and install nothing
#   PYTHON  the interpreter the virtual environment will be made with (default: python3)
set -euo pipefail

list=false
if [ "${1:-}" = --list ]; then
    list=true
    shift
fi
set_name="${1:-}"

packages=(
    libvulkan1            # the Vulkan loader that wgpu-native opens
    mesa-vulkan-drivers   # lavapipe: a Vulkan device on the CPU, so wgpu finds an adapter without a GPU
    g++ cmake             # the cpu engine: pip compiles llama.cpp (llama-cpp-python) where there is no hardware GPU
)
case "$set_name" in
    demo) ;;
    test)
        packages+=(
            chromium      # browser tests: headless, WebGPU on SwiftShader (Playwright drives /usr/bin/chromium)
            # The native app (mobile/): Briefcase checks these before it runs or builds a Linux app (its base
            # packages, then the app's GTK ones from mobile/pyproject.toml), even under the toga-dummy backend.
            python3-dev build-essential gir1.2-gtk-3.0 libcairo2-dev libcanberra-gtk3-module libgirepository1.0-dev
        )
        ;;
    *)
        echo "system-deps: name a set, demo or test (got '${set_name}'): system-deps.sh [--list] demo|test" >&2
        exit 2
        ;;
esac
# Node.js builds the web runtime (npm installs Pyodide) and runs Pyodide for the core's tests; a newer Node from
# elsewhere is fine as it is.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    packages+=(nodejs npm)
fi
# Debian splits venv/ensurepip out of the interpreter package.
if ! "${PYTHON:-python3}" -c 'import ensurepip, venv' 2>/dev/null; then
    packages+=(python3-venv)
fi

if $list; then
    printf '%s\n' "${packages[@]}"
    exit 0
fi
if ! command -v dpkg-query >/dev/null; then
    echo "system-deps: not a Debian-based system; install a Vulkan, Metal or D3D12 driver yourself if wgpu finds none"
    exit 0
fi

missing=()
for package in "${packages[@]}"; do
    if [ "$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null)" != installed ]; then
        missing+=("$package")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "system-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
fi
echo "system-deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
