#!/usr/bin/env bash
# Builds the probe agents and runs mlrb's benchmarks, printing the figures
# the performance targets are checked against: the core host costs, Python
# agents' start and memory, the host's overhead per LLM call, loading a
# task folder of 2 GiB, a legitimate request's time while the submission
# service is flooded (bogus tokens, idle and slowloris sockets), replaying and forking a long episode, resuming a
# killed 100-step episode and what a step's durability costs, the Docker
# sandbox's per-script overhead (which needs `mlrb image build`), and what
# one step costs (tool call, snapshots of large workspaces, script start in
# each sandbox against bare python3, peak memory), and what a step costs
# after a script left an 8 GiB sparse file, 200,000 files, a deep tree or
# a 1 GiB file rewritten in place, in each sandbox, and start-up as
# distributions (p50, p99 of 30 runs or more: an agent's instantiation, an
# episode's first and later scripts in each sandbox, an evaluation).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --quiet --release --target wasm32-wasip2 -p probe-agents --examples
cargo bench --profile dev -p mlrb-host --bench core -- "$@"
cargo bench --profile dev -p mlrb-host --bench agents
cargo bench --profile dev -p mlrb-host --bench llm
cargo bench --profile dev -p mlrb-host --bench task_load
cargo bench --profile dev -p mlrb-host --bench queue
cargo bench --profile dev -p mlrb-host --bench serve
cargo bench --profile dev -p mlrb-host --bench service_floods
cargo bench --profile dev -p mlrb-host --bench slurm
cargo bench --profile dev -p mlrb-host --bench egress
cargo build --quiet -p mlrb-host
cargo bench --profile dev -p mlrb-host --bench replay
cargo bench --profile dev -p mlrb-host --bench resume
target_dir="${CARGO_TARGET_DIR:-target}"
"$target_dir/debug/mlrb" image build
cargo bench --profile dev -p mlrb-host --bench docker
cargo bench --profile dev -p mlrb-host --bench step_costs
cargo bench --profile dev -p mlrb-host --bench workspace_shapes
cargo bench --profile dev -p mlrb-host --bench startup
/usr/bin/python3 scripts/bench_scheduling.py "$target_dir/debug/mlrb" \
    "$target_dir/wasm32-wasip2/release/examples/first_call.wasm" --episodes 200 -j 2
