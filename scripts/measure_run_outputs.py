#!/usr/bin/env python3
"""What runs of submitted code leave on disk: (1) a run that writes a sparse
file of 1 GiB into its output folder, and one that writes 200 MiB of data,
as the evaluator finds the copies (apparent size and size on disk); (2) the records of a
vectorize episode whose train.py prints 16 MiB on each stream when it is
imported (every run of the final scoring does), as `du` counts them.

Usage: scripts/measure_run_outputs.py [--mlrb PATH] [--sandbox local|docker]
(after scripts/build.sh; CARGO_TARGET_DIR is honoured). Run it with an older
mlrb binary to compare.
"""
import argparse
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
AGENT = os.path.join(TARGET, "wasm32-wasip2", "release", "baseline.wasm")

# An evaluator making one run that writes a sparse file of 1 GiB and 200 MiB
# of data, then saying what came back.
FLOOD_EVAL = r'''import os, sys
import mlrb_eval
SPARSE = """
with open("/mlrb/output/sparse", "wb") as f:
    try:
        f.truncate(1 << 30)
    except OSError as e:
        print("truncate refused:", e)
"""
DATA = """
chunk = b"x" * (1 << 20)
with open("/mlrb/output/data", "wb") as f:
    for _ in range(200):
        f.write(chunk)
"""
def score(workspace, hidden):
    for code in (SPARSE, DATA):
        try:
            run = mlrb_eval.run_submission(["python3", "-I", "/mlrb/in/h.py"], inputs={"h.py": code}, timeout=120)
        except mlrb_eval.Invalid as refused:
            print("MEASURED run refused:", refused, file=sys.stderr)
            continue
        for name in sorted(os.listdir(run.outputs)):
            st = os.stat(os.path.join(run.outputs, name))
            print(f"MEASURED {name}: {st.st_size >> 20} MiB apparent, {st.st_blocks * 512 >> 20} MiB on disk",
                  file=sys.stderr)
    return 1.0
if __name__ == "__main__":
    mlrb_eval.main(score)
'''

# A starter whose import prints 16 MiB on each stream.
LOUD = "import sys\nsys.stdout.write('o' * (16 << 20))\nsys.stderr.write('e' * (16 << 20))\n"


def du(path):
    out = subprocess.run(["du", "-sb", path], check=True, capture_output=True, text=True).stdout
    return int(out.split()[0])


def mlrb_run(mlrb, task, out, sandbox):
    done = subprocess.run([mlrb, "run", "--agent", AGENT, "--task", task, "--out", out, "--run-name", "r",
                           "--sandbox", sandbox, "--json"], capture_output=True, text=True)
    return os.path.join(out, "r", "vectorize", "baseline", "0"), done


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlrb", default=os.path.join(TARGET, "debug", "mlrb"))
    parser.add_argument("--sandbox", default="local")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        task = os.path.join(tmp, "vectorize")
        shutil.copytree(os.path.join(ROOT, "tasks", "vectorize"), task)
        with open(os.path.join(task, "scripts", "eval.py"), "w") as f:
            f.write(FLOOD_EVAL)
        episode, done = mlrb_run(args.mlrb, task, os.path.join(tmp, "flood"), args.sandbox)
        with open(os.path.join(episode, "eval.stderr")) as f:
            for line in f:
                if line.startswith("MEASURED"):
                    print("output folder:", line[len("MEASURED "):].strip())
        loud = os.path.join(tmp, "loud")
        shutil.copytree(os.path.join(ROOT, "tasks", "vectorize"), loud)
        with open(os.path.join(loud, "env", "train.py")) as f:
            starter = f.read()
        with open(os.path.join(loud, "env", "train.py"), "w") as f:
            f.write(LOUD + starter)
        episode, done = mlrb_run(args.mlrb, loud, os.path.join(tmp, "logs"), args.sandbox)
        runs = [n for n in os.listdir(episode) if n.startswith("eval-run-")]
        logged = sum(os.path.getsize(os.path.join(episode, n)) for n in runs)
        print(f"records of a loud episode: {du(episode) >> 20} MiB in all, {logged >> 20} MiB of runs' logs "
              f"({len(runs)} files)")


if __name__ == "__main__":
    main()
