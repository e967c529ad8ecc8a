#!/usr/bin/env bash
# Sets up and builds only what it runs, then compares two agents on a
# built-in task in the local bubblewrap sandbox: the baseline (the starter
# train.py, unchanged) and the search agent (estimator swaps and setting
# changes kept when validate() says they help). With --llm, also the
# research agent calling tools of the local SmolLM2-135M offline (minutes of
# CPU an episode, each capped at 24k tokens; installs the model first).
# Prints the comparison table and writes the HTML report.
# Usage: scripts/demo.sh [--llm] [task] [seeds] (default: digits, 2 seeds).
set -euo pipefail
cd "$(dirname "$0")/.."
llm="" positional=()
for arg in "$@"; do
    case "$arg" in
        --llm) llm=1 ;;
        -*) echo "scripts/demo.sh: unknown option $arg (usage: scripts/demo.sh [--llm] [task] [seeds])" >&2; exit 2 ;;
        *) positional+=("$arg") ;;
    esac
done
task="${positional[0]:-digits}"
seeds="${positional[1]:-2}"
if [ -n "$llm" ]; then
    scripts/setup.sh --with llm
    scripts/build.sh --demo --llm
else
    scripts/setup.sh
    scripts/build.sh --demo
fi
target_dir="${CARGO_TARGET_DIR:-target}"
agents="$target_dir/wasm32-wasip2/release"
run="demo-$(date -u +%Y%m%d-%H%M%S)"
research=()
if [ -n "$llm" ]; then
    research=(--agent "$agents/research_agent.wasm" --llm local --llm-tokens 24000)
else
    echo "demo: the research agent (a local language model, minutes of CPU an episode) runs with scripts/demo.sh --llm"
fi
"$target_dir/debug/mlrb" bench \
    --agent "$agents/baseline.wasm" \
    --agent "$agents/search_agent.wasm" \
    "${research[@]}" \
    --task "$task" \
    --seeds "$seeds" \
    -j "$(nproc)" \
    --out runs \
    --run-name "$run"
echo
echo "report:       runs/$run/report.html"
echo "trace viewer: $target_dir/debug/mlrb view runs/$run"
