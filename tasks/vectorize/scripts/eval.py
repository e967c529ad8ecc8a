"""Evaluate a workspace of the mlrb `vectorize` task: time its forward()
against the unmodified train.py's, in CPU time.

Usage: python3 eval.py <workspace_dir> <hidden_dir>

The workspace's train.py must define forward(x, weights, bias) (see
env/train.py). Its code never runs in this process, nor in this sandbox:
every call is a run of mlrb's submission runner (task.toml: [scoring]
submission = "code"), a fresh sandbox of its own that sees the workspace
(read-only) and the call's inputs, and neither the hidden files nor this
evaluator:

  1. the run's harness (HARNESS below: this evaluator's code, not the
     agent's) loads the inputs, then says "ready" on its channel and waits
     until mlrb has read the run's CPU time (its control group's);
  2. the harness imports the workspace's train module (module-level code
     counts), calls forward() and sends the result (np.save format) back;
  3. mlrb reads the run's CPU time again when the result's last byte has
     arrived and ends the run (nothing it started survives); only then is
     the result parsed and compared here with this evaluator's own
     implementation (np.allclose with rtol=1e-4, atol=1e-6 * max(1, max
     |expected|); the shape must match and the values be finite; float32
     results are fine).

First one untimed call on a small batch of odd shapes checks correctness
(so that forward() stays general). Then, in each of 5 rounds (9 when the
first call uses under 0.25 s of CPU; more, up to twice as many, while
either side's two quickest runs differ by over 10 %), the unmodified
train.py's forward() (STARTER below) and the workspace's run one after the other (which goes
first alternates), in runs of the same shape, on the same freshly drawn
batch of 16 images of 32x32 pixels with 3 channels and 16 filters of 3x3.
The score is the workspace's least CPU time over the starter's least
(mlrb_eval.cpu_ratio says why the least): load on the machine stretches
wall-clock times, not CPU time, and what the machine adds to CPU time
comes in bursts that the quickest run of each side escapes. Lower is
better (the unmodified train.py scores 1, the reference solution about
0.006), as MLAgentBench's improvement is 1 - seconds / baseline seconds;
the same ratio with each side's second-quickest run goes with it as its
spread, and the median seconds (wall clock, the figure a reader of
MLAgentBench compares with) and CPU seconds as measures beside it. A call
that raises, crashes, returns a wrong result or uses more than
CALL_CPU_LIMIT_S of CPU makes the submission invalid. CPU time sums every
thread and process of the run, so parallel code gains nothing; the
numerical libraries get one thread each.

Prints as its last line of stdout one JSON object, {"score": <ratio>,
"spread": {...}, "measures": {...}} or {"score": null, "error": "...",
"kind": "..."}, and exits 0 in both cases; a non-zero exit means the
evaluator itself failed (also where mlrb can measure no CPU time: a host
without a control group for the runs). The hidden dir is not used.
"""
import io

import numpy as np

import mlrb_eval
from mlrb_eval import Invalid

MODULE = "train"                      # the workspace module that defines forward()
MAX_SOURCE_BYTES = 1024 * 1024        # train.py larger than this is refused
READY_TIMEOUT_S = 60                  # for the run to start and load the inputs
CALL_CPU_LIMIT_S = 30                 # CPU seconds of one call, import included
CALL_WALL_LIMIT_S = 300               # wall seconds of one run, however loaded the machine
TIMED_SHAPE = dict(n=16, h=32, w=32, c_in=3, c_out=16, k=3)
CHECK_SHAPE = dict(n=3, h=13, w=10, c_in=2, c_out=5, k=4)
ROUNDS, FAST_ROUNDS = 5, 9            # rounds of timing; more for a fast submission
FAST_CPU_S = 0.25                     # a first timed call under this many CPU seconds is fast

# The run's harness: loads the inputs before any workspace code runs and
# times nothing itself (mlrb does, from "ready" to the result's last
# byte). Its argument names the module: the workspace's train, or the
# evaluator's copy of the starter (from the run's inputs).
HARNESS = r"""
import sys, traceback
import numpy as np
x = np.load("/mlrb/in/x.npy", allow_pickle=False)
weights = np.load("/mlrb/in/w.npy", allow_pickle=False)
bias = np.load("/mlrb/in/b.npy", allow_pickle=False)
name = sys.argv[1]
""" + mlrb_eval.HARNESS_CHANNEL + r"""
ready()
sys.path.insert(0, "/workspace" if name == "train" else "/mlrb/in")
try:
    import importlib
    module = importlib.import_module(name)
    send_array(module.forward(x, weights, bias))
except BaseException:
    traceback.print_exc()
    os._exit(3)
os._exit(0)
"""

# The unmodified train.py's forward() (env/train.py), timed beside the
# workspace's in every round: a call of a second or so, whose CPU time is
# measured to within a few per cent however loaded the machine is (a call
# of a few milliseconds, such as the reference solution's, gains 10-15 % of
# CPU time under load, which a ratio to it would carry).
STARTER = r"""
import numpy as np


def forward(x, weights, bias):
    n, h, w, c_in = x.shape
    k, _, _, c_out = weights.shape
    h_conv, w_conv = h - k + 1, w - k + 1
    conv = np.zeros((n, h_conv, w_conv, c_out))
    for b in range(n):
        for i in range(h_conv):
            for j in range(w_conv):
                window = x[b, i:i + k, j:j + k, :]
                for f in range(c_out):
                    conv[b, i, j, f] = np.sum(window * weights[:, :, :, f]) + bias[f]
    conv = np.maximum(conv, 0.0)
    h_pool, w_pool = h_conv // 2, w_conv // 2
    out = np.zeros((n, h_pool, w_pool, c_out))
    for b in range(n):
        for i in range(h_pool):
            for j in range(w_pool):
                for f in range(c_out):
                    out[b, i, j, f] = np.max(conv[b, 2 * i:2 * i + 2, 2 * j:2 * j + 2, f])
    return out
"""


# ---------------------------------------------------------------------------
# This evaluator's own implementation of the layer


def expected_forward(x, weights, bias):
    n, h, w, c_in = x.shape
    k, _, _, c_out = weights.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))  # n, h', w', c_in, k, k
    conv = np.einsum("nijcpq,pqcf->nijf", windows, weights, optimize=True) + bias
    conv = np.maximum(conv, 0.0)
    hp, wp = conv.shape[1] // 2, conv.shape[2] // 2
    return conv[:, :2 * hp, :2 * wp].reshape(n, hp, 2, wp, 2, c_out).max(axis=(2, 4))


def make_input(rng, n, h, w, c_in, c_out, k):
    x = rng.standard_normal((n, h, w, c_in))
    weights = rng.standard_normal((k, k, c_in, c_out)) / np.sqrt(k * k * c_in)
    bias = rng.standard_normal(c_out) * 0.1
    return x, weights, bias


# ---------------------------------------------------------------------------
# One call of the workspace's forward(), in a run of its own


def npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def call(inputs, module="train"):
    """Runs `module`.forward(*inputs) in a run of mlrb's submission runner;
    returns (run, result)."""
    limit = 2 * 8 * expected_size(inputs) + 4096  # np.save bytes of a float64 result, with room
    files = {f"{name}.npy": npy(array) for name, array in zip("xwb", inputs)}
    files["harness.py"] = HARNESS
    if module != "train":
        files[f"{module}.py"] = STARTER
    run = mlrb_eval.run_submission(
        ["python3", "-I", "/mlrb/in/harness.py", module], inputs=files,
        timeout=READY_TIMEOUT_S + CALL_WALL_LIMIT_S, timed=True, result_max_bytes=limit,
    )
    if run.result is None:
        failed(run, inputs)
    if run.cpu_seconds is not None and run.cpu_seconds > CALL_CPU_LIMIT_S:
        raise Invalid(f"forward() used more than {CALL_CPU_LIMIT_S} s of CPU "
                      f"(on a batch of shape {inputs[0].shape})", "code-timeout")
    try:
        result = np.load(io.BytesIO(run.result), allow_pickle=False)
    except Exception as e:  # malformed bytes: the workspace sent something odd
        raise Invalid(f"the result of forward() could not be read back ({type(e).__name__})", "wrong-result")
    return run, result


def failed(run, inputs):
    """Raises Invalid saying why the run ended without sending a result."""
    if run.termination == "timed-out":
        raise Invalid(f"forward() did not finish within {CALL_WALL_LIMIT_S} s "
                      f"(on a batch of shape {inputs[0].shape})", "code-timeout")
    last = run.stderr.strip().splitlines()[-1:] or [""]
    if run.termination == "exited" and run.exit_code == 3:
        raise Invalid("importing train.py or calling forward() raised an exception "
                      f"({mlrb_eval.one_line(last[0], 200)}; run python3 train.py to see the traceback)",
                      "code-failed")
    raise Invalid(f"the process running forward() ended ({run.termination}, exit code {run.exit_code}) "
                  "before sending a result (the workspace code must not exit, close its output or crash)",
                  "code-failed")


def expected_size(inputs):
    x, weights, _ = inputs
    n, h, w, _ = x.shape
    k, _, _, c_out = weights.shape
    return max(n * ((h - k + 1) // 2) * ((w - k + 1) // 2) * c_out, 1)


def check(result, expected, what):
    if not isinstance(result, np.ndarray) or result.shape != expected.shape:
        shape = getattr(result, "shape", None)
        raise Invalid(f"forward() returned shape {shape} on {what}, expected {expected.shape}", "wrong-result")
    if result.dtype.kind not in "fiu":
        raise Invalid(f"forward() returned dtype {result.dtype} on {what}, expected float64", "wrong-result")
    result = result.astype(np.float64)
    if not np.all(np.isfinite(result)):
        raise Invalid(f"forward() returned non-finite values on {what}", "wrong-result")
    atol = 1e-6 * max(1.0, float(np.max(np.abs(expected))))
    if not np.allclose(result, expected, rtol=1e-4, atol=atol):
        bad = int(np.sum(~np.isclose(result, expected, rtol=1e-4, atol=atol)))
        raise Invalid(f"forward() returned wrong values on {what}: {bad} of {expected.size} "
                      "elements differ from the original computation", "wrong-result")


def score(workspace, hidden):
    # train.py must be a regular file of reasonable size (it is imported by path).
    mlrb_eval.read_file(f"{workspace}/{MODULE}.py", "train.py", MAX_SOURCE_BYTES)
    rng = np.random.default_rng()  # fresh values on every evaluation (see the docstring)
    small = make_input(rng, **CHECK_SHAPE)
    _, result = call(small)
    check(result, expected_forward(*small), "a small batch of shape %s" % (small[0].shape,))

    def one_round():
        inputs = make_input(rng, **TIMED_SHAPE)
        expected = expected_forward(*inputs)

        def submission():
            run, result = call(inputs)
            check(result, expected, "the timed batch")
            return run

        def starter():
            run, result = call(inputs, "starter")
            if not np.allclose(result, expected, rtol=1e-9, atol=1e-9):  # the evaluator's own fault
                raise RuntimeError("the starter's forward() disagrees with expected_forward()")
            return run
        return submission, starter

    def rounds_for(first):
        return FAST_ROUNDS if first.cpu_seconds is not None and first.cpu_seconds < FAST_CPU_S else ROUNDS
    return mlrb_eval.cpu_ratio(one_round, ROUNDS, rounds_for)


if __name__ == "__main__":
    mlrb_eval.main(score)
