#!/usr/bin/env python3
"""Scheduling overhead of `mlrb bench`.

Runs N episodes of a trivial agent (it makes one host call and returns) on a
trivial task twice: back to back, one `mlrb run` after another, as a user
would by hand; and as one `mlrb bench -j 2`. Prints both throughputs, their
ratio (the target is >= 90 %), and the bench host's resident memory sampled
as the episodes complete (it should stay flat with the number of episodes).

Usage: scripts/bench_scheduling.py <mlrb binary> <agent.wasm> [--episodes N] [-j J]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

TASK_TOML = """
name = "trivial"
version = "1.0.0"
suite = "bench"
description = "does nothing, fast: for measuring the host"
research_problem = "Return at once."
[metric]
name = "score"
higher_is_better = true
baseline = 1.0
[budget]
max_steps = 5
wall_seconds = 60
[resources]
cpu_slots = 1
memory_mb = 256
pids = 64
script_timeout_seconds = 20
"""

EVAL = 'import json\nprint(json.dumps({"score": 1.0}))\n'


def make_task(root):
    task = os.path.join(root, "trivial")
    os.makedirs(os.path.join(task, "env"))
    os.makedirs(os.path.join(task, "scripts"))
    with open(os.path.join(task, "task.toml"), "w") as f:
        f.write(TASK_TOML)
    with open(os.path.join(task, "env", "train.py"), "w") as f:
        f.write("print('nothing to train')\n")
    with open(os.path.join(task, "scripts", "eval.py"), "w") as f:
        f.write(EVAL)
    return task


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def journal_done(run_dir):
    try:
        with open(os.path.join(run_dir, "journal.jsonl")) as f:
            return sum(1 for line in f if '"event":"done"' in line)
    except OSError:
        return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mlrb")
    parser.add_argument("agent")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("-j", type=int, default=2)
    args = parser.parse_args()

    root = tempfile.mkdtemp(prefix="mlrb-sched-")
    task = make_task(root)
    env = dict(os.environ, MLRB_CACHE_DIR=os.path.join(root, "cache"))
    # Warm the caches (prepare, agent compile) so both sides start equal.
    subprocess.run([args.mlrb, "run", "--agent", args.agent, "--task", task, "--out", os.path.join(root, "warm"),
                    "--run-name", "w"], env=env, check=True, stdout=subprocess.DEVNULL)

    started = time.monotonic()
    for seed in range(1, args.episodes + 1):
        subprocess.run([args.mlrb, "run", "--agent", args.agent, "--task", task, "--seed", str(seed),
                        "--out", os.path.join(root, "by-hand"), "--run-name", "r"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
    by_hand = time.monotonic() - started

    run_dir = os.path.join(root, "bench", "b")
    started = time.monotonic()
    child = subprocess.Popen([args.mlrb, "bench", "--quiet", "--agent", args.agent, "--task", task,
                              "--seeds", str(args.episodes), "-j", str(args.j),
                              "--out", os.path.join(root, "bench"), "--run-name", "b"],
                             env=env, stdout=subprocess.DEVNULL)
    samples = {}
    peak = 0
    while child.poll() is None:
        rss = rss_kib(child.pid)
        if rss:
            peak = max(peak, rss)
            done = journal_done(run_dir)
            for mark in (args.episodes // 10, args.episodes // 4, args.episodes // 2,
                         3 * args.episodes // 4, args.episodes - 1):
                if done >= mark and mark not in samples:
                    samples[mark] = rss
        time.sleep(0.02)
    bench = time.monotonic() - started
    if child.returncode != 0:
        sys.exit(f"mlrb bench failed with {child.returncode}")

    n = args.episodes
    print(f"episodes: {n}, trivial agent, trivial task, cache warm")
    print(f"back to back by hand: {by_hand:.1f} s, {n / by_hand:.2f} episodes/s")
    print(f"mlrb bench -j {args.j}:     {bench:.1f} s, {n / bench:.2f} episodes/s")
    print(f"bench throughput / by hand: {by_hand / bench * 100:.0f} % (target >= 90 %)")
    print("bench host resident memory after k episodes: " +
          ", ".join(f"{k}: {v / 1024:.0f} MiB" for k, v in sorted(samples.items())) +
          f"; peak {peak / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
