#!/usr/bin/env bash
# Sets up (idempotent), builds the host and every agent from source, and runs
# the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cargo nextest run --no-fail-fast "$@"
