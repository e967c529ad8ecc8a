#!/usr/bin/env bash
# Builds the mlrb host and the agents that ship with it (and the hostile
# test agents) from source.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet -p mlrb-host
# The research agent with MLAgentBench's prompt method first, kept under its own name.
wasm_dir="${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release"
cargo build --quiet --release --target wasm32-wasip2 -p research-agent --features prompt-method
cp "$wasm_dir/research_agent.wasm" "$wasm_dir/research_agent_prompt.wasm"
cargo build --quiet --release --target wasm32-wasip2 -p baseline -p research-agent -p search-agent
cargo build --quiet --release --target wasm32-wasip2 -p hostile-agents --examples
cargo build --quiet --release --target wasm32-wasip2 -p other-world -p legacy-agent
