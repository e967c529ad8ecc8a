#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU and no Docker, runs the
# starter and evaluator of mini ML Research Benchmark tasks on the GPU in
# mlrb's local (bubblewrap) sandbox, with the GPU passed through and a
# Python environment with PyTorch named by --python, and prints per task:
# how it was prepared, the starter's time, its score, the GPU's peak memory;
# then per step of each task (stand-in, prepare, starter, evaluation, each
# invalid case) the limits it ran under and how its stderr ended.
#
# It builds nothing on that machine. `--pack DIR`, run here, gathers what it
# needs into DIR: the release mlrb binary, bubblewrap, and wheels of the
# Python packages the tasks need that the GPU machine's Python may lack
# (installed there offline into the --python environment, only if missing).
#
#   scripts/gpu_check.sh --pack .gpu-check
#   scripts/gpu_check.sh --carried .gpu-check --python /opt/venv [--gpu 0] [--out DIR] [TASK...]
#   scripts/gpu_check.sh --dry-run ...     # all that needs no GPU; prints what it would run
#
# Each task runs `mlrb tasks test TASK --smoke --gpus G`: its real prepare.py
# against the stand-in hub (toy models, synthetic data in the real schemas:
# no network, no data to bring), its starter with the task's [smoke]
# arguments and its evaluator, all through CUDA, and every invalid
# submission refused. Peak memory is nvidia-smi's memory.used of the GPU,
# sampled every 200 ms while the task runs. Exit status 1 when a task fails.
#
# Everything it saw stays in one folder (--out, else $OUT, else
# gpu-check-<time>), small enough to copy back: machine.txt (kernel, user,
# control group, bubblewrap, mlrb), nvidia-smi.txt, probe.json (what a
# script sees in the sandbox with the GPU: user, limits, seccomp, device
# nodes, variables' names, cuInit's result, torch.cuda.is_available(), and
# whether reserving address space, sizing a memfd and starting threads work
# there; `mlrb doctor --gpu-probe`), probe.strace (the probe's failed
# system calls, where strace is installed), and per task report.json,
# mlrb.log, and steps.tsv (per step: limits, variables' names, stdout and
# stderr tails, bubblewrap's arguments). One run takes at most about
# 8 minutes (--budget seconds for all tasks, 420 by default).
set -euo pipefail
cd "$(dirname "$0")/.."
export MLRB_TASKS_DIR="$PWD/tasks"

DEFAULT_TASKS=(mini_baby_lm mini_mini_pile mini_budget_model_training)
# Packages the tasks import that a PyTorch machine may lack, at the torch
# image's locked versions (pure Python wheels).
PACK_WHEELS=(datasets dill multiprocess xxhash)
TASK_SECONDS=180
BUDGET_SECONDS=420

dry_run=0 pack="" carried=".gpu-check" gpu=0 mlrb="" python="${MLRB_PYTHON:-}" out="${OUT:-}" tasks=()
while [ $# -gt 0 ]; do
    case "$1" in
    --dry-run) dry_run=1 ;;
    --pack) pack="$2"; shift ;;
    --carried) carried="$2"; shift ;;
    --gpu) gpu="$2"; shift ;;
    --mlrb) mlrb="$2"; shift ;;
    --python) python="$2"; shift ;;
    --task-seconds) TASK_SECONDS="$2"; shift ;;
    --budget) BUDGET_SECONDS="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h | --help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
    # The `pack` profile: a release build without LTO (Cargo.toml), much faster to make.
    cargo build --quiet --profile pack -p mlrb-host
    target="${CARGO_TARGET_DIR:-target}"
    strip -o "$pack/mlrb" "$target/pack/mlrb"
    cp "$(command -v bwrap)" "$pack/bin/bwrap"
    # strace with its libraries, for the probe's failed system calls.
    if command -v strace >/dev/null; then
        mkdir -p "$pack/lib"
        cp "$(command -v strace)" "$pack/bin/strace.bin"
        ldd "$(command -v strace)" | awk '$3 ~ /^\// && $1 !~ /^lib(c|m|pthread|dl)\.so/ { print $3 }' |
            xargs -r cp -t "$pack/lib"
        # shellcheck disable=SC2016 # the wrapper expands them when it runs
        printf '#!/bin/sh\nhere=$(dirname "$0")\nLD_LIBRARY_PATH="$here/../lib" exec "$here/strace.bin" "$@"\n' >"$pack/bin/strace"
        chmod +x "$pack/bin/strace"
    fi
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
for candidate in "$mlrb" "$carried/mlrb" "${CARGO_TARGET_DIR:-target}"/{pack,release}/mlrb "$(command -v mlrb || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then mlrb="$candidate"; break; fi
done
[ -x "$mlrb" ] || fail "no mlrb binary: pass --mlrb, or carry one (--pack DIR here, --carried DIR there)"
say "mlrb: $mlrb ($("$mlrb" --version))"

# bubblewrap: the machine's, else the carried one.
if ! command -v bwrap >/dev/null && [ -x "$carried/bin/bwrap" ]; then
    export PATH="$PWD/$carried/bin:$PATH"
fi
command -v bwrap >/dev/null || fail "no bubblewrap: install it, or carry it (--pack)"
if ! command -v strace >/dev/null && [ -x "$carried/bin/strace" ]; then
    strace() { "$carried/bin/strace" "$@"; }
fi
say "bubblewrap: $(command -v bwrap) ($(bwrap --version))"

# The Python environment with PyTorch.
[ -n "$python" ] || python="$(command -v python3)"
interpreter="$python"
[ -d "$python" ] && interpreter="$python/bin/python3"
[ -x "$interpreter" ] || fail "--python $python: no interpreter there"
say "python: $python ($("$interpreter" --version 2>&1))"

# The modules the tasks need that this Python lacks, and the carried wheels for them.
mapfile -t modules < <(for task in "${tasks[@]}"; do
    "$mlrb" tasks show "$task" --json | "$interpreter" -c \
        'import json, sys; print("\n".join(json.load(sys.stdin)["resources"]["python_packages"]))'
done | sort -u)
missing=$("$interpreter" -c 'import importlib.util, sys
print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))' "${modules[@]}")
if [ -n "$missing" ]; then
    wheels=("$carried"/wheels/*.whl)
    [ -e "${wheels[0]}" ] || fail "$python lacks $missing and no wheels were carried ($carried/wheels)"
    install=("$interpreter" -m pip install --quiet --no-index --no-deps --no-compile "${wheels[@]}")
    if [ $dry_run = 1 ]; then would "${install[*]}  # for $missing"; else "${install[@]}"; fi
fi

# `exec`, so that the sampler's pid is nvidia-smi's own: killing a subshell
# would leave nvidia-smi running, holding the caller's stderr open.
gpu_memory() { exec nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$gpu" -lms 200 2>/dev/null; }
[ -n "$out" ] || out="gpu-check-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
say "everything it sees goes to $out"
{
    echo "kernel: $(uname -srm)"
    echo "user: $(id)"
    echo "cgroup: $(tr '\n' ' ' </proc/self/cgroup)"
    echo "bubblewrap: $(command -v bwrap) ($(bwrap --version))"
    echo "mlrb: $mlrb ($("$mlrb" --version))"
    echo "python: $python ($("$interpreter" --version 2>&1))"
    echo "strace: $(type -t strace >/dev/null && echo yes || echo none)"
    "$mlrb" doctor 2>&1 | grep -E 'cgroups|bubblewrap|gpus' || true
} >"$out/machine.txt" 2>&1
if [ $dry_run = 1 ]; then
    would "nvidia-smi" | tee "$out/nvidia-smi.txt"
    probe_device=none
else
    nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || fail "nvidia-smi finds no GPU (see $out/nvidia-smi.txt)"
    probe_device="$gpu"
fi

# What a script sees in the sandbox with the GPU, and which of its system
# calls failed (a denial by seccomp is EPERM, a limit EFBIG, EAGAIN or ENOMEM).
probe=("$mlrb" doctor --gpu-probe "$probe_device" --python "$python")
if type -t strace >/dev/null; then
    strace -f -Z -qq -o "$out/probe.strace.full" "${probe[@]}" >"$out/probe.json" 2>"$out/probe.log" || true
    # The failed calls, counted by call and error (the full trace can be large).
    awk '{ for (i = 1; i <= NF; i++) if ($i == "=" && $(i + 1) == "-1") { split($2, c, "("); n[c[1] " " $(i + 2)]++ } }
        END { for (k in n) print n[k], k }' "$out/probe.strace.full" | sort -rn >"$out/probe.strace"
    rm -f "$out/probe.strace.full"
else
    "${probe[@]}" >"$out/probe.json" 2>"$out/probe.log" || true
fi

status=0
started=$SECONDS
for task in "${tasks[@]}"; do
    mkdir -p "$out/$task"
    test=("$mlrb" tasks test "$task" --smoke --sandbox local --gpus "$gpu" --python "$python" --json --keep)
    if [ $dry_run = 1 ]; then
        would "timeout $TASK_SECONDS ${test[*]}  # while sampling: nvidia-smi -i $gpu memory.used"
        continue
    fi
    left=$((BUDGET_SECONDS - (SECONDS - started)))
    seconds=$((left < TASK_SECONDS ? left : TASK_SECONDS))
    if [ "$seconds" -lt 30 ]; then
        say "$task: skipped, the check's $BUDGET_SECONDS s are spent"
        echo "skipped: the check's $BUDGET_SECONDS s were spent" >"$out/$task/mlrb.log"
        status=1
        continue
    fi
    gpu_memory >"$out/$task/memory" &
    sampler=$!
    NO_COLOR=1 MLRB_LOG="warn,mlrb::sandbox::local=debug" timeout "$seconds" "${test[@]}" \
        >"$out/$task/report.json" 2>"$out/$task/mlrb.log" || status=1
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
done

"$interpreter" - "$out" "$dry_run" "${tasks[@]}" <<'EOF'
import json, pathlib, re, sys
out, dry, tasks = pathlib.Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3:]
FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def table(rows):
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(" | ".join(str(cell).ljust(width) for cell, width in zip(row, widths)))


def tail(path, lines=6):
    try:
        text = pathlib.Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " / ".join(line.strip() for line in text[-lines:])[-600:]


def steps(task):
    """One row per sandboxed step, from mlrb's log: its name (its log's), limits, variables, tails."""
    rows = []
    log = out / task / "mlrb.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    for line in ANSI.sub("", text).splitlines():
        if " bubblewrap " not in line:
            continue
        fields = {k: json.loads(v) if v.startswith('"') else v for k, v in FIELD.findall(line)}
        prefix = fields.get("log", "")
        rows.append({"step": pathlib.Path(prefix).name if prefix else "(no log)",
                     "limits": fields.get("limits", ""), "env": fields.get("env", ""),
                     "stdout": tail(prefix + ".stdout") if prefix else "",
                     "stderr": tail(prefix + ".stderr") if prefix else "",
                     "args": fields.get("args", "")})
    keys = ("step", "limits", "env", "stdout", "stderr", "args")
    with open(out / task / "steps.tsv", "w") as f:
        f.write("\t".join(keys) + "\n")
        for row in rows:
            f.write("\t".join(row[k].replace("\t", " ") for k in keys) + "\n")
    return rows


def task_row(task):
    if dry:
        return (task, "-", "-", "-", "-", "not run (--dry-run)")
    try:
        report = json.loads((out / task / "report.json").read_text())[0]
    except Exception:
        return (task, "-", "-", "-", "-", "failed: " + (tail(out / task / "mlrb.log", 1) or "timed out"))
    memory = [int(l) for l in (out / task / "memory").read_text().split() if l.isdigit()]
    starter = report.get("starter") or {}
    score = starter.get("score")
    fails = [f["check"] + ": " + f["detail"] for f in report["findings"] if f["status"] == "fail"]
    return (
        task,
        f"stand-in hub, {report['prepare_seconds']:.1f} s" + (" (cached)" if report["prepared_from_cache"] else ""),
        f"{starter.get('train_seconds', 0):.1f} s",
        "invalid" if score is None else f"{score:.4g} (smoke)",
        f"{max(memory)} MiB" if memory else "not sampled",
        "passed" if report["passed"] else "FAILED: " + "; ".join(fails)[:300],
    )


def probe_line():
    try:
        probe = json.loads((out / "probe.json").read_text())
    except Exception as error:
        return "probe: no result (%s): %s" % (error, tail(out / "probe.log", 3))
    parts = [("user", probe.get("user")), ("cuda driver", probe.get("cuda_driver")), ("torch", probe.get("torch")),
             ("reserve 256 GiB", probe.get("reserve_256_gib")), ("memfd 16 GiB", probe.get("memfd_16_gib")),
             ("threads of 64", probe.get("threads_of_64")), ("limits", probe.get("limits")),
             ("seccomp", probe.get("seccomp")), ("nodes", probe.get("nodes")), ("sys", probe.get("sys"))]
    return "probe (the sandbox's view): " + " | ".join("%s %s" % (k, json.dumps(v)) for k, v in parts)


table([("task", "prepare", "starter", "score", "peak GPU memory", "result")] + [task_row(t) for t in tasks])
rows = [("task", "step", "limits", "stderr (tail)")]
for task in tasks:
    rows += [(task, r["step"], r["limits"], r["stderr"][-120:]) for r in steps(task)]
if len(rows) > 1:
    print()
    table(rows)
print()
print(probe_line())
if (out / "probe.strace").exists():
    print("probe's failed system calls (count, call, errno):", tail(out / "probe.strace", 12))
EOF
say "$((SECONDS - started)) s for ${#tasks[@]} task(s) on GPU $gpu; all of it in $out"
exit $status
