"""The output protocol of an evaluator (see :mod:`mlrb_llm_eval`): progress
on stderr, the ``{"details": ...}`` line and the final JSON line on stdout,
and the exceptions of the submitted model turned into :class:`Invalid`."""
from __future__ import annotations

import contextlib
import json
import math
import sys

# mlrb mounts mlrb_eval beside this module: one exception class and one
# protocol line for every evaluator.
import mlrb_eval
from mlrb_eval import Invalid, one_line


def log(*parts):
    """Progress messages go to stderr, so that stdout ends with the JSON line."""
    print(*parts, file=sys.stderr, flush=True)


def _jsonable(value):
    """JSON-friendly form of numbers from numpy or torch, and of sets."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    for cast in (int, float):
        try:
            if hasattr(value, "item"):
                return _jsonable(value.item())
            return _jsonable(cast(value))
        except (TypeError, ValueError):
            continue
    return str(value)


def finish(score=None, error=None, details=None):
    """Prints ``{"details": ...}`` (when given), then the final JSON line, and
    exits 0. ``finish(score=x)``: a valid submission, x rounded to 6 decimals;
    ``finish(error=e)``: an invalid one. A score that is not a finite number
    is an evaluator bug: it raises ValueError (non-zero exit)."""
    if details:
        print(json.dumps({"details": _jsonable(details)}, sort_keys=True))
    mlrb_eval.finish(score=score, error=error)


def run(score_fn, argv=None):
    """Runs an evaluator: ``score_fn(workspace_dir, hidden_dir)`` returns the
    score, or ``(score, details)``, or raises :class:`Invalid`; either way the
    JSON line is printed and the process exits 0. Any other exception
    propagates (an evaluator failure, non-zero exit)."""
    argv = sys.argv if argv is None else argv
    if len(argv) != 3:
        sys.exit("usage: eval.py <workspace_dir> <hidden_dir>")
    details = {}
    try:
        result = score_fn(argv[1], argv[2])
    except Invalid as e:
        details = getattr(e, "details", None) or {}
        finish(error=e, details=details)
    if isinstance(result, tuple):
        score, details = result
    else:
        score = result
    finish(score=score, details=details)


@contextlib.contextmanager
def agent_code(what):
    """Turns any exception raised while the submitted model runs into
    :class:`Invalid` (``what`` says which step), so a broken model is an
    invalid submission rather than an evaluator failure."""
    try:
        yield
    except Invalid:
        raise
    except MemoryError:
        raise Invalid(f"{what}: out of memory")
    except Exception as e:  # noqa: BLE001 - everything the model can raise
        name = type(e).__name__
        text = str(e)
        if "OutOfMemory" in name or "out of memory" in text.lower():
            raise Invalid(f"{what}: the model ran out of GPU memory")
        raise Invalid(f"{what} failed: {name}: {one_line(text, 300)}")
