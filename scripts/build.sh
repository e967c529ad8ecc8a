#!/usr/bin/env bash
# Builds the mlrb host and the agents that ship with it (and the hostile
# test agents) from source.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet -p mlrb-host
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
