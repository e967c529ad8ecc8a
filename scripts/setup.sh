#!/usr/bin/env bash
# Installs what mlrb needs on a fresh Debian/Ubuntu machine (idempotent):
# debootstrap to build the Docker sandbox's image without a registry,
# bubblewrap for the sandbox, Debian's Python with the scientific stack the
# built-in tasks use, Chromium for the report and viewer tests, and the Rust
# target agents are compiled for.
set -euo pipefail

packages=(bubblewrap debootstrap tar python3 python3-numpy python3-scipy python3-sklearn python3-pandas chromium)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "mlrb setup: installing ${missing[*]}"
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! rustup target list --installed | grep -q '^wasm32-wasip2$'; then
    echo "mlrb setup: adding the wasm32-wasip2 Rust target"
    rustup target add wasm32-wasip2
fi
