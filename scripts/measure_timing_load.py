#!/usr/bin/env python3
"""Whether a timed score survives load: the vectorize task's score (CPU time
against the unmodified forward()'s, in rounds) and the wall-clock seconds
kept beside it, for the same submission scored on an idle machine and with
busy loops beside the evaluation, and whether `mlrb verify` passes the
recorded score each time; for two submissions, the unmodified train.py (a
call of about a second) and the reference solution (a few milliseconds).

Usage: scripts/measure_timing_load.py [--evals N] [--busy B] [--sandbox local|docker]
(after scripts/build.sh; CARGO_TARGET_DIR is honoured). For each
submission it runs the baseline agent once (on a copy of the task whose
train.py is that submission), which records a score, then
for each load (no busy loop, then B of them: `while :; do :; done`, ended by
pid) scores the episode's final snapshot N times with `mlrb eval` on a copy
and runs `mlrb verify` on the recorded episode once. It prints, per
evaluation, the score, its rounds' spread, the median seconds (wall) and
CPU seconds of a call and of the reference's, and per load the medians and
how far they moved from the recorded ones: the score should stay within
what `mlrb verify` allows it, the seconds should not.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
MLRB = os.path.join(TARGET, "debug", "mlrb")
AGENT = os.path.join(TARGET, "wasm32-wasip2", "release", "baseline.wasm")


class BusyLoops:
    """`n` processes spinning on the CPU, each ended by its pid."""

    def __init__(self, n):
        self.n = n
        self.children = []

    def __enter__(self):
        self.children = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(self.n)]
        return self

    def __exit__(self, *_):
        for child in self.children:
            child.kill()
            child.wait()


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def evaluate(episode, sandbox, scratch):
    """score.json of a fresh scoring of `episode` (on a copy: eval rewrites it)."""
    copy = os.path.join(scratch, "copy")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(episode, copy, symlinks=True)
    done = subprocess.run([MLRB, "eval", copy, "--sandbox", sandbox, "--json"],
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def verify(episode, sandbox):
    done = subprocess.run([MLRB, "verify", episode, "--sandbox", sandbox], capture_output=True, text=True)
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return done.returncode == 0, last


def row(label, score):
    spread, measures = score.get("spread") or {}, score.get("measures") or {}
    return (f"{label:14s} {score['score']:9.5f}  {spread.get('low', 0):8.5f}-{spread.get('high', 0):<8.5f}"
            f" {measures.get('seconds', 0):9.4f} {measures.get('cpu_seconds', 0):9.4f}"
            f" {measures.get('reference_cpu_seconds', 0):9.5f}")


def task_with(tmp, solution):
    """A copy of vectorize whose train.py is `solution` (a path in the task)."""
    task = os.path.join(tmp, solution.replace("/", "-"), "vectorize")
    shutil.copytree(os.path.join(ROOT, "tasks", "vectorize"), task)
    shutil.copy(os.path.join(task, solution), os.path.join(task, "env", "train.py"))
    return task


def measure(args, tmp, label, task):
    out = tempfile.mkdtemp(prefix="runs-", dir=tmp)
    ran = subprocess.run([MLRB, "run", "--agent", AGENT, "--task", task, "--out", out, "--run-name", "r",
                          "--sandbox", args.sandbox, "--json"], capture_output=True, text=True)
    if ran.returncode != 0:
        sys.exit(f"mlrb run failed ({ran.returncode}): {ran.stderr.strip()[-2000:]}")
    episode = os.path.join(out, "r", "vectorize", "baseline", "0")
    with open(os.path.join(episode, "score.json")) as f:
        recorded = json.load(f)
    print(f"{label}, {args.sandbox} sandbox, {os.cpu_count()} CPUs")
    print(f"{'':14s} {'score':>9s}  {'rounds low-high':17s} {'seconds':>9s} {'cpu s':>9s} {'ref cpu s':>9s}")
    print(row("recorded", recorded))
    summary = []
    for busy in (0, args.busy):
        with BusyLoops(busy):
            scores = [evaluate(episode, args.sandbox, tmp) for _ in range(args.evals)]
            load = load_average()
            passed, said = verify(episode, args.sandbox)
        for n, score in enumerate(scores, 1):
            print(row(f"{busy} busy #{n}", score))
        median = statistics.median(s["score"] for s in scores)
        seconds = statistics.median(s["measures"]["seconds"] for s in scores)
        summary.append((busy, load, median, seconds, passed, said))
    base_score, base_seconds = recorded["score"], recorded["measures"]["seconds"]
    for busy, load, median, seconds, passed, said in summary:
        print(f"  {busy} busy loops (load {load:.1f}): score {median:.5g} ({median / base_score:.2f}x recorded), "
              f"seconds {seconds:.4f} ({seconds / base_seconds:.2f}x recorded); "
              f"verify {'passes' if passed else 'FAILS: ' + said}")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evals", type=int, default=3)
    parser.add_argument("--busy", type=int, default=4)
    parser.add_argument("--sandbox", default="local", choices=["local", "docker"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        measure(args, tmp, "vectorize, the unmodified train.py", os.path.join(ROOT, "tasks", "vectorize"))
        measure(args, tmp, "vectorize, the reference solution", task_with(tmp, "scripts/reference/train.py"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
