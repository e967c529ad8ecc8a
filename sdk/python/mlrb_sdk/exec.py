"""Scripts, run by the host in its sandbox (``.py`` with Python 3, ``.sh``
with sh), with the workspace as working directory. Each run is one step."""

from __future__ import annotations

from typing import Optional, Sequence

from . import _core
from ._core import ExecResult, _call


def run(script: str, args: Sequence[str] = (), timeout_seconds: Optional[int] = None) -> ExecResult:
    """Runs a workspace script. ``timeout_seconds`` is capped by the task's
    limit and never runs past the episode's deadline; ``None`` takes the
    task's default."""
    return _call(_core._exec.execute_script, script, [str(a) for a in args], timeout_seconds)
