#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU and no Docker, runs the
# starter and evaluator of mini ML Research Benchmark tasks on the GPU in
# mlrb's local (bubblewrap) sandbox, with the GPU passed through and a
# Python environment with PyTorch named by --python, and prints per task:
# how it was prepared, the starter's time, its score, the GPU's peak memory.
#
# It builds nothing on that machine. `--pack DIR`, run here, gathers what it
# needs into DIR: the release mlrb binary, bubblewrap, and wheels of the
# Python packages the tasks need that the GPU machine's Python may lack
# (installed there offline into the --python environment, only if missing).
#
#   scripts/gpu_check.sh --pack .gpu-check
#   scripts/gpu_check.sh --carried .gpu-check --python /opt/venv [--gpu 0] [TASK...]
#   scripts/gpu_check.sh --dry-run ...     # all that needs no GPU; prints what it would run
#
# Each task runs `mlrb tasks test TASK --smoke --gpus G`: its real prepare.py
# against the stand-in hub (toy models, synthetic data in the real schemas:
# no network, no data to bring), its starter with the task's [smoke]
# arguments and its evaluator, all through CUDA, and every invalid
# submission refused. Peak memory is nvidia-smi's memory.used of the GPU,
# sampled every 200 ms while the task runs. Exit status 1 when a task fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export MLRB_TASKS_DIR="$PWD/tasks"

DEFAULT_TASKS=(mini_baby_lm mini_mini_pile mini_budget_model_training)
# Packages the tasks import that a PyTorch machine may lack, at the torch
# image's locked versions (pure Python wheels).
PACK_WHEELS=(datasets dill multiprocess xxhash)
TASK_SECONDS=180

dry_run=0 pack="" carried=".gpu-check" gpu=0 mlrb="" python="${MLRB_PYTHON:-}" tasks=()
while [ $# -gt 0 ]; do
    case "$1" in
    --dry-run) dry_run=1 ;;
    --pack) pack="$2"; shift ;;
    --carried) carried="$2"; shift ;;
    --gpu) gpu="$2"; shift ;;
    --mlrb) mlrb="$2"; shift ;;
    --python) python="$2"; shift ;;
    --task-seconds) TASK_SECONDS="$2"; shift ;;
    -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_check: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) tasks+=("$1") ;;
    esac
    shift
done
[ ${#tasks[@]} -gt 0 ] || tasks=("${DEFAULT_TASKS[@]}")
say() { echo "gpu_check: $*" >&2; }
fail() { say "$*"; exit 1; }
would() { echo "would run: $*"; }

if [ -n "$pack" ]; then
    mkdir -p "$pack/bin" "$pack/wheels"
    cargo build --quiet --release -p mlrb-host
    target="${CARGO_TARGET_DIR:-target}"
    strip -o "$pack/mlrb" "$target/release/mlrb"
    cp "$(command -v bwrap)" "$pack/bin/bwrap"
    pins=()
    for name in "${PACK_WHEELS[@]}"; do
        pins+=("$(grep -i "^$name==" images/torch/requirements.lock | cut -d' ' -f1)")
    done
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$pack/wheels" "${pins[@]}"
    du -sh "$pack"
    exit 0
fi

# The mlrb binary: named, carried, built here, or on PATH.
[ -z "$mlrb" ] || [ -x "$mlrb" ] || fail "--mlrb $mlrb: not an executable"
for candidate in "$mlrb" "$carried/mlrb" "${CARGO_TARGET_DIR:-target}/release/mlrb" "$(command -v mlrb || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then mlrb="$candidate"; break; fi
done
[ -x "$mlrb" ] || fail "no mlrb binary: pass --mlrb, or carry one (--pack DIR here, --carried DIR there)"
say "mlrb: $mlrb ($("$mlrb" --version))"

# bubblewrap: the machine's, else the carried one.
if ! command -v bwrap >/dev/null && [ -x "$carried/bin/bwrap" ]; then
    export PATH="$PWD/$carried/bin:$PATH"
fi
command -v bwrap >/dev/null || fail "no bubblewrap: install it, or carry it (--pack)"
say "bubblewrap: $(command -v bwrap) ($(bwrap --version))"

# The Python environment with PyTorch.
[ -n "$python" ] || python="$(command -v python3)"
interpreter="$python"
[ -d "$python" ] && interpreter="$python/bin/python3"
[ -x "$interpreter" ] || fail "--python $python: no interpreter there"
say "python: $python ($("$interpreter" --version 2>&1))"

# The modules the tasks need that this Python lacks, and the carried wheels for them.
modules=$(for task in "${tasks[@]}"; do
    "$mlrb" tasks show "$task" --json | "$interpreter" -c \
        'import json, sys; print("\n".join(json.load(sys.stdin)["resources"]["python_packages"]))'
done | sort -u)
missing=$("$interpreter" -c 'import importlib.util, sys
print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))' $modules)
if [ -n "$missing" ]; then
    wheels=$(ls "$carried"/wheels/*.whl 2>/dev/null || true)
    [ -n "$wheels" ] || fail "$python lacks $missing and no wheels were carried ($carried/wheels)"
    install=("$interpreter" -m pip install --quiet --no-index --no-deps --no-compile $wheels)
    if [ $dry_run = 1 ]; then would "${install[*]}  # for $missing"; else "${install[@]}"; fi
fi

gpu_memory() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$gpu" -lms 200; }
if [ $dry_run = 1 ]; then
    would "nvidia-smi -L"
else
    nvidia-smi -L || fail "nvidia-smi finds no GPU"
fi

results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
status=0
started=$SECONDS
for task in "${tasks[@]}"; do
    test=("$mlrb" tasks test "$task" --smoke --sandbox local --gpus "$gpu" --python "$python" --json)
    if [ $dry_run = 1 ]; then
        would "timeout $TASK_SECONDS ${test[*]}  # while sampling: nvidia-smi -i $gpu memory.used"
        continue
    fi
    gpu_memory >"$results/$task.memory" &
    sampler=$!
    timeout "$TASK_SECONDS" "${test[@]}" >"$results/$task.json" 2>"$results/$task.log" || status=1
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
done
[ $dry_run = 1 ] && exit 0

"$interpreter" - "$results" "${tasks[@]}" <<'EOF'
import json, pathlib, sys
results, tasks = pathlib.Path(sys.argv[1]), sys.argv[2:]
rows = [("task", "prepare", "starter", "score", "peak GPU memory", "result")]
for task in tasks:
    try:
        report = json.loads((results / f"{task}.json").read_text())[0]
    except Exception:
        log = (results / f"{task}.log").read_text().strip().splitlines()
        rows.append((task, "-", "-", "-", "-", "failed: " + (log[-1] if log else "timed out")))
        continue
    memory = [int(l) for l in (results / f"{task}.memory").read_text().split() if l.isdigit()]
    starter = report.get("starter") or {}
    score = starter.get("score")
    fails = [f["detail"] for f in report["findings"] if f["status"] == "fail"]
    rows.append((
        task,
        f"stand-in hub, {report['prepare_seconds']:.1f} s" + (" (cached)" if report["prepared_from_cache"] else ""),
        f"{starter.get('train_seconds', 0):.1f} s",
        "invalid" if score is None else f"{score:.4g} (smoke)",
        f"{max(memory)} MiB" if memory else "not sampled",
        "passed" if report["passed"] else "FAILED: " + "; ".join(fails)[:200],
    ))
widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
for row in rows:
    print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths)))
EOF
say "$((SECONDS - started)) s for ${#tasks[@]} task(s) on GPU $gpu"
exit $status
