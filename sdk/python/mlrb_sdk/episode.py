"""The episode: the task, the usage so far, the research log, validation."""

from __future__ import annotations

from . import _core
from ._core import ScoreReport, TaskInfo, Usage, _call


def task() -> TaskInfo:
    """The task being worked on."""
    return _call(_core._episode.task)


def usage() -> Usage:
    """Steps, time and tokens spent so far."""
    return _call(_core._episode.current_usage)


def note(text: str) -> None:
    """Appends a line to the research log kept in the trace (not a step)."""
    _call(_core._episode.note, text)


def validate() -> ScoreReport:
    """Scores a copy of the current workspace with the task's evaluator,
    where the task allows it (``unavailable`` otherwise). A step, capped by
    the task; the score may be hidden, leaving only whether it is valid."""
    return _call(_core._episode.validate)
