#!/usr/bin/env python3
"""What the submission runner costs a task whose evaluator runs submitted
code: the vectorize task scored by its evaluator as it is (every call of the
agent's forward() in a sandbox of its own, timed by the host) against the
same task with the evaluator it had before (the calls in child processes of
the evaluator, timed by it, in its own sandbox).

Usage: scripts/bench_submission_runner.py [--runs N] [--sandbox local|docker]
(after scripts/build.sh; CARGO_TARGET_DIR is honoured). For each variant it
runs the baseline agent once and then `mlrb eval` on its episode N times,
and prints the median wall time of an evaluation and the scores it gave.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
MLRB = os.path.join(TARGET, "debug", "mlrb")
AGENT = os.path.join(TARGET, "wasm32-wasip2", "release", "baseline.wasm")
# The evaluator of vectorize before the submission runner.
BEFORE = "608487a"


def task_before(tmp):
    """A copy of vectorize with the evaluator and task.toml it had before."""
    task = os.path.join(tmp, "vectorize")
    shutil.copytree(os.path.join(ROOT, "tasks", "vectorize"), task)
    for rel in ("scripts/eval.py", "task.toml"):
        text = subprocess.run(["git", "-C", ROOT, "show", f"{BEFORE}:tasks/vectorize/{rel}"],
                              check=True, capture_output=True, text=True).stdout
        if rel == "task.toml":  # validate() may not reveal a score without a split any more
            text = text.replace("hide_score = false", "hide_score = true")
        with open(os.path.join(task, rel), "w") as f:
            f.write(text)
    return task


def measure(task, runs, sandbox, out):
    subprocess.run([MLRB, "run", "--agent", AGENT, "--task", task, "--out", out, "--run-name", "r",
                    "--sandbox", sandbox, "--json"], check=True, capture_output=True)
    episode = os.path.join(out, "r", "vectorize", "baseline", "0")
    seconds, scores = [], []
    for _ in range(runs):
        started = time.monotonic()
        done = subprocess.run([MLRB, "eval", episode, "--sandbox", sandbox, "--json"],
                              check=True, capture_output=True, text=True)
        seconds.append(time.monotonic() - started)
        scores.append(json.loads(done.stdout)["score"])
    return statistics.median(seconds), scores


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sandbox", default="local", choices=["local", "docker"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        variants = [("before: calls timed by the evaluator", task_before(tmp)),
                    ("after: each call in a sandbox of its own", os.path.join(ROOT, "tasks", "vectorize"))]
        print(f"vectorize, the baseline agent's submission, {args.runs} evaluations each, {args.sandbox} sandbox")
        for label, task in variants:
            wall, scores = measure(task, args.runs, args.sandbox, os.path.join(tmp, label[:6].strip(":")))
            print(f"{label:45s} median evaluation {wall:6.2f} s   scores {', '.join(f'{s:.3g}' for s in scores)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
