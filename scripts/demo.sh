#!/usr/bin/env bash
# Sets up, builds, and runs the baseline agent on a built-in task in the
# local bubblewrap sandbox. Usage: scripts/demo.sh [task] (default: digits).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
target_dir="${CARGO_TARGET_DIR:-target}"
"$target_dir/debug/mlrb" run \
    --agent "$target_dir/wasm32-wasip2/release/baseline.wasm" \
    --task "${1:-digits}"
