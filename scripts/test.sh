#!/usr/bin/env bash
# Sets up (idempotent), builds the host and every agent from source, builds
# the Docker sandbox's images when an engine is reachable (a no-op when they
# exist; under CI=true a failure is fatal), and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --all
target_dir="${CARGO_TARGET_DIR:-target}"
cargo build --quiet -p mlrb-host

# The standard image and the torch image (PyPI's wheels as images/torch/
# requirements.lock pins them, about 3 GiB downloaded once into mlrb's
# cache) need only the host. Building them is mostly downloading and
# unpacking, so it runs beside the agents' and the tests' compilation.
images_log="$target_dir/images.log"
build_images() {
    for image in "" --with-torch; do
        "$target_dir/debug/mlrb" image build $image || {
            echo "the Docker sandbox image (${image:-standard}) could not be built"
            return 1
        }
    done
}
echo "building the Docker images beside the compilation (log: $images_log)" >&2
build_images > "$images_log" 2>&1 &
images=$!
trap 'kill "$images" 2>/dev/null || true' EXIT

scripts/build.sh
cargo nextest run --no-run --cargo-quiet

if ! wait "$images"; then
    tail -n 20 "$images_log" >&2
    if [ "${CI:-}" = "true" ]; then
        echo "CI needs the Docker images and a Docker engine" >&2
        exit 1
    fi
    echo "warning: no Docker images; the Docker sandbox tests will be skipped" >&2
fi
trap - EXIT
cargo nextest run --no-fail-fast "$@"
