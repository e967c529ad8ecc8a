"""mlrb's evaluator for MLAgentBench's `vectorization` task, in place of its
own scripts/eval.py.

Usage: python3 mlrb_mlab_vectorization.py <submission_folder>

Upstream's train.py times its own forward pass and writes the time into
submission.csv, and upstream's get_score returns that number: the agent's
code reports its own score, so any number can be written there. This
evaluator measures instead. It runs with the task's pristine env/ at
../env (cwd: the prepared scripts folder) and the agent's files as the
submission folder, and never runs the agent's code itself: each run goes
to mlrb's submission runner (a sandbox of its own, timed by mlrb).

  1. correctness: on a small batch, Conv2DLayer(3, 8, 3, 2, 2, 'relu') of the
     submission, built after the same np.random.seed as the task's own
     (pristine) train.py's, must return what the pristine forward() returns
     (np.allclose, rtol 1e-5); its kernels come from that seed, so only
     forward() may change, as the task says;
  2. timing: upstream's own measure (building the layer and one forward() on
     a batch of 32 images of 64x64x3), in 3 rounds (up to 6, see
     mlrb_eval.cpu_ratio); in each, the task's pristine train.py and the
     submission's run it, one after the other (which goes first
     alternates), on the same batch, each in a fresh
     sandbox that imports train.py after mlrb's clocks start (so no work
     can be done at import time on inputs it has not seen). The timed
     result is checked against the pristine forward() too.

The score is the submission's least CPU time over the pristine train.py's
least (lower is better; the unmodified train.py scores about 1; see
mlrb_eval.cpu_ratio for why the least): upstream's own figure is the
wall-clock seconds of that call, which load on the machine stretches,
while CPU time measured by mlrb in the runs' control groups does not, and
the ratio cancels the machine's speed. Upstream's improvement, 1 - seconds
/ baseline seconds, is 1 - this score. The median seconds (wall clock,
upstream's unit; they include importing train.py, a few milliseconds
upstream's timing leaves out) and CPU seconds are kept beside the score as
measures, the same ratio with each side's second-quickest run as its
spread.
"""
import io
import os
import sys

import numpy as np

import mlrb_eval
from mlrb_eval import Invalid

SMALL = (2, 16, 16, 3)
TIMED = (32, 64, 64, 3)       # upstream train.py's batch
LAYER = (3, 8, 3, 2, 2, "relu")
ROUNDS = 3
TIMEOUT_S = 600

HARNESS = r"""
import sys, traceback
import numpy as np
x = np.load("/mlrb/in/x.npy", allow_pickle=False)
seed = int(open("/mlrb/in/seed").read())
name = sys.argv[1]
""" + mlrb_eval.HARNESS_CHANNEL + r"""
ready()
sys.path.insert(0, "/workspace" if name == "train" else "/mlrb/in")
try:
    import importlib
    module = importlib.import_module(name)
    np.random.seed(seed)
    layer = module.Conv2DLayer(3, 8, 3, 2, 2, "relu")
    send_array(layer.forward(x))
except BaseException:
    traceback.print_exc()
    os._exit(3)
os._exit(0)
"""


def pristine(x, seed):
    """The task's own forward() on `x`, its kernels drawn after `seed`."""
    sys.path.insert(0, os.path.abspath("../env"))
    import train as original
    np.random.seed(seed)
    return original.Conv2DLayer(*LAYER).forward(x)


def npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def original_source():
    """The task's pristine train.py, run beside the submission's."""
    with open(os.path.join("..", "env", "train.py"), encoding="utf-8") as f:
        return f.read()


def run(x, seed, module="train"):
    """(run, result) of the submission's forward() on `x` (or of the
    pristine train.py's, as the module `original`)."""
    inputs = {"harness.py": HARNESS, "x.npy": npy(x), "seed": str(seed)}
    if module != "train":
        inputs[f"{module}.py"] = original_source()
    ran = mlrb_eval.run_submission(
        ["python3", "-I", "/mlrb/in/harness.py", module], inputs=inputs,
        timeout=TIMEOUT_S, timed=True, result_max_bytes=64 << 20,
    )
    if ran.result is None and module != "train":
        raise RuntimeError(f"the pristine train.py did not run ({ran.termination}): {ran.stderr[-500:]}")
    if ran.result is None:
        kind = "code-timeout" if ran.termination == "timed-out" else "code-failed"
        last = (ran.stderr.strip().splitlines() or [""])[-1]
        raise Invalid(f"train.py's Conv2DLayer could not run ({ran.termination}): {mlrb_eval.one_line(last, 200)}", kind)
    try:
        return ran, np.load(io.BytesIO(ran.result), allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - the submission sent something odd
        raise Invalid(f"the result of forward() could not be read back ({type(e).__name__})", "wrong-result")


def check(result, expected, what):
    if not isinstance(result, np.ndarray) or result.shape != expected.shape:
        raise Invalid(f"forward() returned shape {getattr(result, 'shape', None)} on {what}, "
                      f"expected {expected.shape}", "wrong-result")
    if result.dtype.kind not in "fiu" or not np.allclose(result.astype(np.float64), expected, rtol=1e-5, atol=1e-8):
        raise Invalid(f"forward() returned other values than the original on {what}", "wrong-result")


def score(folder):
    mlrb_eval.read_file(os.path.join(folder, "train.py"), "train.py", 1 << 20)
    rng = np.random.default_rng()
    seed = int(rng.integers(0, 2**31 - 1))
    small = rng.standard_normal(SMALL)
    check(run(small, seed)[1], pristine(small, seed), "a small batch")
    x = rng.standard_normal(TIMED)
    expected = pristine(x, seed)

    def timed(module, what):
        ran, result = run(x, seed, module)
        check(result, expected, what)
        return ran

    def one_round():
        return (lambda: timed("train", "the timed batch"),
                lambda: timed("original", "the pristine train.py's timed batch"))
    return mlrb_eval.cpu_ratio(one_round, ROUNDS)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: mlrb_mlab_vectorization.py <submission_folder>")
    try:
        value = score(sys.argv[1])
    except Invalid as e:
        mlrb_eval.finish(error=e)
    mlrb_eval.finish(score=value)


if __name__ == "__main__":
    main()
