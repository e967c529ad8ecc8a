#!/usr/bin/env bash
# Builds the mlrb host and the agents that ship with it (and the hostile
# test agents) from source. `--demo` builds only what the demo runs (the
# host, the baseline and the search agent; with `--llm` the research agent).
set -euo pipefail
cd "$(dirname "$0")/.."
demo="" llm=""
for arg in "$@"; do
    case "$arg" in
        --demo) demo=1 ;;
        --llm) llm=1 ;;
        *) echo "scripts/build.sh: unknown argument $arg (use --demo [--llm])" >&2; exit 2 ;;
    esac
done
cargo build --quiet -p mlrb-host
if [ -n "$demo" ]; then
    agents=(-p baseline -p search-agent)
    [ -z "$llm" ] || agents+=(-p research-agent)
    cargo build --quiet --release --target wasm32-wasip2 "${agents[@]}"
    exit 0
fi
cargo build --quiet --release --target wasm32-wasip2 -p baseline -p research-agent -p search-agent
# The research agent with MLAgentBench's prompt method, built in a target
# folder of its own (so research_agent.wasm is never replaced by it) and
# kept under its own name.
target_dir="${CARGO_TARGET_DIR:-target}"
CARGO_TARGET_DIR="$target_dir/prompt-method" \
    cargo build --quiet --release --target wasm32-wasip2 -p research-agent --features prompt-method
cp "$target_dir/prompt-method/wasm32-wasip2/release/research_agent.wasm" \
    "$target_dir/wasm32-wasip2/release/research_agent_prompt.wasm"
cargo build --quiet --release --target wasm32-wasip2 -p hostile-agents --examples
cargo build --quiet --release --target wasm32-wasip2 -p other-world -p legacy-agent -p http-probe
