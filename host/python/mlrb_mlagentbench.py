"""mlrb's adapter for MLAgentBench evaluators.

Usage: python3 mlrb_mlagentbench.py <eval.py> <submission_folder>

MLAgentBench's scripts/eval.py defines get_score(submission_folder) and
returns a number. mlrb runs this adapter in the evaluation sandbox with the
task's (prepared) scripts folder as the working directory and the task's
pristine prepared env/ at ../env, as MLAgentBench lays them out, so that
modules eval.py imports from ../env (a metric in the starter train.py) are
the task's own, never the agent's. The agent's files are the submission
folder, read as data. The adapter imports eval.py without running its
__main__ block, calls get_score on the submission folder and reports
mlrb's protocol line, {"score": x} (see mlrb_eval.report).

An exception raised by get_score because of the submission (say,
submission.csv is missing or malformed) makes it invalid: {"score": null,
"error": "..."}, exit status 0. An evaluator that cannot be imported, or
whose get_score fails for its own reasons (a module or a file of its own
missing, the network), is a task problem: exit status 2.
"""
import importlib.util
import math
import os
import sys
import traceback

import mlrb_eval


def emit(score=None, error=None, kind=None):
    if error is None:
        mlrb_eval.report({"score": score})
    else:
        result = {"score": None, "error": " ".join(str(error).split())[:500]}
        if kind in mlrb_eval.KINDS:
            result["kind"] = kind
        mlrb_eval.report(result)


def fault_kind(error, folder):
    """What the agent may learn of get_score's exception: that a file of the
    submission folder is missing, or nothing (its name and message are
    get_score's, or the submission's own, and may quote the answers)."""
    if isinstance(error, FileNotFoundError) and type(error) is FileNotFoundError:
        return "missing"
    return None


def submission_fault(error, folder):
    """Whether get_score's exception is the submission's doing (a missing or
    malformed file) rather than the evaluator's or the host's: a module it
    cannot import, a network it cannot reach, a file of its own missing,
    memory it cannot have."""
    import socket
    import urllib.error
    infrastructure = (ImportError, ConnectionError, TimeoutError, urllib.error.URLError,
                      socket.gaierror, MemoryError, SystemExit, KeyboardInterrupt)
    if isinstance(error, infrastructure):
        return False
    if isinstance(error, (FileNotFoundError, PermissionError)) and error.filename:
        inside = os.path.realpath(str(error.filename)).startswith(os.path.realpath(folder) + os.sep)
        return inside
    return True


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: mlrb_mlagentbench.py <eval.py> <submission_folder>")
    eval_path, folder = sys.argv[1], sys.argv[2]
    scripts_dir = os.path.dirname(os.path.abspath(eval_path))
    # As if run from scripts/: its helpers import, relative paths resolve.
    sys.path.insert(0, scripts_dir)
    try:
        spec = importlib.util.spec_from_file_location("eval", eval_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["eval"] = module
        spec.loader.exec_module(module)
    except BaseException:
        traceback.print_exc()
        print(f"mlrb: cannot import {eval_path}", file=sys.stderr)
        sys.exit(2)
    get_score = getattr(module, "get_score", None)
    if not callable(get_score):
        print(f"mlrb: {eval_path} defines no get_score(submission_folder)", file=sys.stderr)
        sys.exit(2)
    try:
        result = get_score(folder)
    except BaseException as e:
        traceback.print_exc()
        if not submission_fault(e, folder):
            print("mlrb: get_score failed for a reason that is not the submission's", file=sys.stderr)
            sys.exit(2)
        emit(error=f"get_score raised {type(e).__name__}: {e}", kind=fault_kind(e, folder))
        return
    try:
        score = float(result)
    except (TypeError, ValueError):
        emit(error=f"get_score returned {type(result).__name__} {str(result)[:60]!r}, not a number", kind="out-of-range")
        return
    if not math.isfinite(score):
        emit(error=f"get_score returned {score}", kind="out-of-range")
        return
    emit(score=score)


if __name__ == "__main__":
    main()
