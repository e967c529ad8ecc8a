#!/usr/bin/env bash
# Sets up, builds, and compares two agents on a built-in task in the local
# bubblewrap sandbox: the baseline (the starter train.py, unchanged) and the
# search agent (estimator swaps and setting changes kept when validate()
# says they help), and, when the local model is installed (setup installs
# it), the research agent calling tools of SmolLM2-135M offline, each of its
# episodes capped at 24k tokens. Prints the comparison table and writes the
# HTML report.
# Usage: scripts/demo.sh [task] [seeds] (default: digits, 2 seeds).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
target_dir="${CARGO_TARGET_DIR:-target}"
agents="$target_dir/wasm32-wasip2/release"
run="demo-$(date -u +%Y%m%d-%H%M%S)"
research=()
llm_venv="${MLRB_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mlrb/tools}/llm"
if "$llm_venv/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
    research=(--agent "$agents/research_agent.wasm" --llm local --llm-tokens 24000)
fi
"$target_dir/debug/mlrb" bench \
    --agent "$agents/baseline.wasm" \
    --agent "$agents/search_agent.wasm" \
    "${research[@]}" \
    --task "${1:-digits}" \
    --seeds "${2:-2}" \
    --out runs \
    --run-name "$run"
echo
echo "report:       runs/$run/report.html"
echo "trace viewer: $target_dir/debug/mlrb view runs/$run"
