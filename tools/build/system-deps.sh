#!/usr/bin/env bash
# Install the Debian/Ubuntu packages llmchat needs to run and test, skipping those already installed, so a
# repeated run costs a few dpkg queries. Other systems are left alone (wgpu uses Metal, D3D12 or the installed
# Vulkan driver there).
#   PYTHON  the interpreter the virtual environment will be made with (default: python3)
set -euo pipefail

packages=(
    libvulkan1            # the Vulkan loader that wgpu-native opens
    mesa-vulkan-drivers   # lavapipe: a Vulkan device on the CPU, so wgpu finds an adapter without a GPU
    chromium              # browser tests: headless, WebGPU on SwiftShader (Playwright drives /usr/bin/chromium)
    # The native app (mobile/): Briefcase checks these before it runs or builds a Linux app (its base packages,
    # then the app's GTK ones from mobile/pyproject.toml), even under the toga-dummy backend.
    python3-dev build-essential gir1.2-gtk-3.0 libcairo2-dev libcanberra-gtk3-module libgirepository1.0-dev
)
# Node.js runs Pyodide for the core's tests and npm installs it; a newer Node from elsewhere is fine as it is.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    packages+=(nodejs npm)
fi
# Debian splits venv/ensurepip out of the interpreter package.
if ! "${PYTHON:-python3}" -c 'import ensurepip, venv' 2>/dev/null; then
    packages+=(python3-venv)
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
