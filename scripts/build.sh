#!/usr/bin/env bash
# Builds the mlrb host and the agents that ship with it (and the hostile
# test agents) from source.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet -p mlrb-host
cargo build --quiet --release --target wasm32-wasip2 -p baseline -p research-agent -p search-agent
cargo build --quiet --release --target wasm32-wasip2 -p hostile-agents --examples
cargo build --quiet --release --target wasm32-wasip2 -p other-world
