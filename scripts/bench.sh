#!/usr/bin/env bash
# Builds the probe agents and runs mlrb's core benchmarks, printing the
# figures the performance targets are checked against.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --quiet --release --target wasm32-wasip2 -p probe-agents --examples
cargo bench --profile dev -p mlrb-host --bench core -- "$@"
