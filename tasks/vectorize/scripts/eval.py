"""Evaluate a workspace of the mlrb `vectorize` task: time its forward().

Usage: python3 eval.py <workspace_dir> <hidden_dir>

The workspace's train.py must define forward(x, weights, bias) (see
env/train.py). Its code is never run inside this process: every call runs in
a fresh child process (this interpreter, isolated mode, cwd a private
temporary folder, the workspace first on sys.path), so that it cannot touch
the clock or the checks of the evaluator:

  1. the child loads the inputs (written by this process to the temporary
     folder), says "ready" and waits;
  2. this process starts its clock and says "go"; the child imports the
     workspace's train module (module-level code counts), calls forward()
     and sends the result (np.save format) back through a pipe;
  3. the clock stops when the last byte of the result has arrived; every
     process the child may have started is then killed, and only then is
     the result parsed and compared with this evaluator's own
     implementation (np.allclose with rtol=1e-4,
     atol=1e-6 * max(1, max |expected|); the shape must match and the
     values be finite; float32 results are fine).

First one untimed call on a small batch of odd shapes checks correctness
(so that forward() stays general); then 3 timed calls (7 if the first timed
call takes under 1 s) on a batch of 16 images of 32x32 pixels with 3
channels and 16 filters of 3x3, each with freshly drawn random values (the
run time does not depend on the values; fresh values make caching results
between calls useless). The score is the median time of the timed calls in
seconds, rounded to 3 significant digits; lower is better. A call that
raises, crashes, returns a wrong result or takes longer than
CALL_TIMEOUT_S makes the submission invalid.

Prints as its last line of stdout one JSON object, {"score": <seconds>} or
{"score": null, "error": "..."}, and exits 0 in both cases; a non-zero exit
means the evaluator itself failed. The hidden dir is not used.
"""
import ctypes
import io
import os
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import mlrb_eval
from mlrb_eval import Invalid

MODULE = "train"                      # the workspace module that defines forward()
MAX_SOURCE_BYTES = 1024 * 1024        # train.py larger than this is refused
READY_TIMEOUT_S = 60                  # for the child to start and load the inputs
CALL_TIMEOUT_S = 30                   # for one call, import included
TIMED_SHAPE = dict(n=16, h=32, w=32, c_in=3, c_out=16, k=3)
CHECK_SHAPE = dict(n=3, h=13, w=10, c_in=2, c_out=5, k=4)
FAST_S = 1.0                          # a first timed call under this -> 7 timed calls, else 3

# The child: loads the inputs before any workspace code runs and times
# nothing itself; its stdout and stderr go to /dev/null, the result to the
# evaluator through a private duplicate of the original stdout pipe.
CHILD = r"""
import os, sys
workspace, folder, tag = sys.argv[1], sys.argv[2], sys.argv[3]
import io
import numpy as np
x = np.load(os.path.join(folder, tag + "_x.npy"), allow_pickle=False)
weights = np.load(os.path.join(folder, tag + "_w.npy"), allow_pickle=False)
bias = np.load(os.path.join(folder, tag + "_b.npy"), allow_pickle=False)
status_path = os.path.join(folder, tag + "_status.txt")
pipe = os.dup(1)
devnull = os.open(os.devnull, os.O_WRONLY)
os.dup2(devnull, 1)
os.dup2(devnull, 2)
def send(data):
    view = memoryview(data)
    while view:
        view = view[os.write(pipe, view):]
send(b"ready\n")
if sys.stdin.readline().strip() != "go":
    os._exit(4)
sys.path.insert(0, workspace)
try:
    import importlib
    module = importlib.import_module("train")
    result = np.asarray(module.forward(x, weights, bias))
    buffer = io.BytesIO()
    np.save(buffer, result, allow_pickle=False)
    payload = buffer.getvalue()
    send(len(payload).to_bytes(8, "little") + payload)
except BaseException as e:
    try:
        with open(status_path, "w") as f:
            f.write(type(e).__name__[:60])
    finally:
        os._exit(3)
os._exit(0)
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
# Process hygiene: the workspace code must not outlive its call, read this
# process's memory or file descriptors, or print on its behalf.


def harden_self():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)    # PR_SET_DUMPABLE 0: no /proc/<pid>/fd or mem access by others
        libc.prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER: orphans of the child come back here
    except (OSError, AttributeError):
        pass


def descendants():
    """Pids of all processes whose parent chain leads to this process."""
    parent_of = {}
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc: only the process-group kill in call() applies
        return set()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
            parent_of[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    me, found, frontier = os.getpid(), set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parent_of.items() if ppid in frontier and pid not in found} - {me}
        found |= frontier
    return found


def kill_descendants():
    for _ in range(50):
        pids = descendants()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        # Reap the zombies that are our own children or were re-parented here.
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        time.sleep(0.01)


# ---------------------------------------------------------------------------
# One call of the workspace's forward() in a child process


def call(workspace, folder, tag, inputs):
    """Runs forward(*inputs) in a child; returns (seconds, result)."""
    for name, array in zip("xwb", inputs):
        np.save(os.path.join(folder, f"{tag}_{name}.npy"), array, allow_pickle=False)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": folder,
        "TMPDIR": folder,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        if var in os.environ:
            env[var] = os.environ[var]
    limit = 2 * 8 * expected_size(inputs) + 4096  # np.save bytes of a float64 result, with room
    proc = subprocess.Popen(
        [sys.executable, "-I", "-c", CHILD, workspace, folder, tag],
        cwd=folder, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )
    received = bytearray()

    def receive(n_bytes, deadline):
        """Reads from the child until `received` holds n_bytes; False on EOF or timeout."""
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while len(received) < n_bytes:
                left = deadline - time.perf_counter()
                if left <= 0 or not sel.select(left):
                    return False
                chunk = os.read(proc.stdout.fileno(), max(n_bytes - len(received), 1 << 16))
                if not chunk:
                    return False
                received.extend(chunk)
        return True

    try:
        if not receive(6, time.perf_counter() + READY_TIMEOUT_S) or bytes(received) != b"ready\n":
            raise RuntimeError(f"the timing child did not start (exit code {proc.poll()})")
        received.clear()
        start = time.perf_counter()
        deadline = start + CALL_TIMEOUT_S
        try:
            proc.stdin.write(b"go\n")
            proc.stdin.close()
        except BrokenPipeError:
            pass
        complete = receive(8, deadline)
        if complete:
            length = int.from_bytes(received[:8], "little")
            if length > limit:
                raise Invalid(f"the result of forward() is larger than {limit} bytes")
            complete = receive(8 + length, deadline)
        elapsed = time.perf_counter() - start
        if not complete:
            if time.perf_counter() >= deadline:
                raise Invalid(f"forward() did not finish within {CALL_TIMEOUT_S} s "
                              f"(on a batch of shape {inputs[0].shape})")
            try:
                returncode = proc.wait(5)
            except subprocess.TimeoutExpired:
                returncode = None
            failed(folder, tag, returncode)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the child's session, if still there
        except OSError:
            pass
        kill_descendants()
        proc.stdout.close()
    try:
        result = np.load(io.BytesIO(bytes(received[8:8 + length])), allow_pickle=False)
    except Exception as e:  # malformed bytes: the workspace sent something odd
        raise Invalid(f"the result of forward() could not be read back ({type(e).__name__})")
    return elapsed, result


def failed(folder, tag, returncode):
    """Raises Invalid saying why the child ended without sending a result."""
    try:
        with open(os.path.join(folder, f"{tag}_status.txt"), encoding="ascii", errors="replace") as f:
            name = "".join(c for c in f.read(60) if c.isalnum() or c == "_")
    except OSError:
        name = ""
    if returncode == 3 and name:
        raise Invalid(f"importing train.py or calling forward() raised {name}"
                      " (run python3 train.py to see the traceback)")
    if returncode is None:
        how = "closed its output but did not exit"
    elif returncode < 0:
        how = f"was killed by signal {-returncode}"
    else:
        how = f"exited with code {returncode}"
    raise Invalid(f"the process running forward() {how} before sending a result "
                  "(the workspace code must not exit, close its output or crash)")


def expected_size(inputs):
    x, weights, _ = inputs
    n, h, w, _ = x.shape
    k, _, _, c_out = weights.shape
    return max(n * ((h - k + 1) // 2) * ((w - k + 1) // 2) * c_out, 1)


def check(result, expected, what):
    if not isinstance(result, np.ndarray) or result.shape != expected.shape:
        shape = getattr(result, "shape", None)
        raise Invalid(f"forward() returned shape {shape} on {what}, expected {expected.shape}")
    if result.dtype.kind not in "fiu":
        raise Invalid(f"forward() returned dtype {result.dtype} on {what}, expected float64")
    result = result.astype(np.float64)
    if not np.all(np.isfinite(result)):
        raise Invalid(f"forward() returned non-finite values on {what}")
    atol = 1e-6 * max(1.0, float(np.max(np.abs(expected))))
    if not np.allclose(result, expected, rtol=1e-4, atol=atol):
        bad = int(np.sum(~np.isclose(result, expected, rtol=1e-4, atol=atol)))
        raise Invalid(f"forward() returned wrong values on {what}: {bad} of {expected.size} "
                      "elements differ from the original computation")


def score(workspace, hidden):
    # train.py must be a regular file of reasonable size (it is imported by path).
    mlrb_eval.read_file(os.path.join(workspace, MODULE + ".py"), "train.py", MAX_SOURCE_BYTES)
    harden_self()
    rng = np.random.default_rng()  # fresh values on every evaluation (see the docstring)
    folder = tempfile.mkdtemp(prefix="mlrb-vectorize-")
    try:
        small = make_input(rng, **CHECK_SHAPE)
        _, result = call(workspace, folder, "check", small)
        check(result, expected_forward(*small), "a small batch of shape %s" % (small[0].shape,))

        times = []
        while len(times) < 3 or (len(times) < 7 and times[0] < FAST_S):
            inputs = make_input(rng, **TIMED_SHAPE)
            elapsed, result = call(workspace, folder, f"timed{len(times)}", inputs)
            check(result, expected_forward(*inputs), "the timed batch")
            times.append(elapsed)
    finally:
        kill_descendants()
        shutil.rmtree(folder, ignore_errors=True)
    seconds = statistics.median(times)
    return float(f"{seconds:.3g}")


if __name__ == "__main__":
    mlrb_eval.main(score)
