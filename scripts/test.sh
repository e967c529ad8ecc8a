#!/usr/bin/env bash
# Sets up (idempotent), builds the host and every agent from source, builds
# the Docker sandbox's images when an engine is reachable (a no-op when it
# exists; under CI=true a failure is fatal), and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --all
scripts/build.sh
target_dir="${CARGO_TARGET_DIR:-target}"
# The standard image, and the torch image (PyPI's wheels as images/torch/
# requirements.lock pins them, about 3 GiB downloaded once into mlrb's cache).
for image in "" --with-torch; do
    if ! "$target_dir/debug/mlrb" image build $image; then
        if [ "${CI:-}" = "true" ]; then
            echo "the Docker sandbox image ($image) could not be built; CI needs a Docker engine" >&2
            exit 1
        fi
        echo "warning: no Docker image ($image); the Docker sandbox tests will be skipped" >&2
    fi
done
cargo nextest run --no-fail-fast "$@"
