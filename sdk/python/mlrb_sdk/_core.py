"""The bindings componentize-py generates, and what the SDK builds on them."""

from __future__ import annotations

import sys
from typing import Any, Callable, TypeVar

#: The WIT package this SDK targets.
WIT_PACKAGE = "mlrb:agent@0.3.0"

try:  # Inside a component built by componentize-py.
    import wit_world as _world
    from componentize_py_types import Err as _Err
    from wit_world.imports import episode as _episode
    from wit_world.imports import exec as _exec
    from wit_world.imports import llm as _llm
    from wit_world.imports import types as _types
    from wit_world.imports import workspace as _workspace

    TaskInfo = _types.TaskInfo
    Budget = _types.Budget
    Usage = _types.Usage
    DirEntry = _workspace.DirEntry
    EntryKind = _workspace.EntryKind
    ExecResult = _exec.ExecResult
    Termination = _exec.Termination
    ScoreReport = _episode.ScoreReport
    _WorldBase: Any = _world.WitWorld
except ImportError:  # In an editor or a test outside a component.
    _world = _episode = _exec = _llm = _types = _workspace = None
    _Err = None
    TaskInfo = Budget = Usage = DirEntry = EntryKind = Any  # type: ignore[misc,assignment]
    ExecResult = Termination = ScoreReport = Any  # type: ignore[misc,assignment]
    _WorldBase = object


class ToolError(Exception):
    """A tool call the host refused or could not do.

    ``kind`` is one of ``not-found``, ``permission-denied``,
    ``invalid-argument``, ``too-large``, ``timeout``, ``budget-exhausted``,
    ``unavailable`` and ``io``; ``message`` is what the host said.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class LlmError(Exception):
    """An LLM call that gave no completion.

    ``kind`` is one of ``budget-exhausted``, ``refused``, ``provider``,
    ``timeout``, ``invalid-request``, ``unavailable`` and ``malformed-answer``.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class AgentError(Exception):
    """Raise from :meth:`Agent.run` to give up with a reason: the episode
    ends with the agent's error and the message is recorded."""


def _kebab(name: str) -> str:
    # ToolError_PermissionDenied -> permission-denied
    name = name.split("_", 1)[-1]
    return "".join("-" + c.lower() if c.isupper() else c for c in name).lstrip("-")


T = TypeVar("T")


def _call(function: Callable[..., T], *args: Any, error: type = ToolError) -> T:
    """Calls a generated binding, turning its ``Err`` into ``error``
    (:class:`ToolError`, or :class:`LlmError` for ``llm`` calls) with the
    case's kebab-case kind and its message."""
    if _Err is None:
        raise RuntimeError("mlrb_sdk tools exist only inside an mlrb agent component (build it with `mlrb agent build`)")
    try:
        return function(*args)
    except _Err as err:
        value = err.value
        raise error(_kebab(type(value).__name__), str(getattr(value, "value", value))) from None


class Agent:
    """What an agent author implements: :meth:`run`, then ``WitWorld = MyAgent.export()``."""

    def run(self, task: TaskInfo) -> str:
        """Works on the task and returns the final answer. Raise :class:`AgentError` to give up."""
        raise NotImplementedError

    @classmethod
    def export(cls) -> type:
        """The class componentize-py instantiates for the world's ``run`` export."""
        agent_class = cls

        class WitWorld(_WorldBase):  # type: ignore[misc,valid-type]
            def run(self, task: TaskInfo) -> str:
                # `random` seeded itself when the build imported it; reseed
                # from the host's randomness, which follows --seed.
                if "random" in sys.modules:
                    sys.modules["random"].seed()
                try:
                    return agent_class().run(task)
                except AgentError as error:
                    if _Err is None:
                        raise
                    raise _Err(str(error)) from None

        return WitWorld
