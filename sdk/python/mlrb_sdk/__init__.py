"""mlrb-sdk: write an mlrb agent in Python.

An mlrb agent is a WebAssembly component that exports ``run(task)`` and
reaches the world only through the host's tool interfaces. This package
wraps the bindings componentize-py generates for the ``mlrb:agent`` world
in a small, typed API, the same as the Rust SDK's:

* :mod:`mlrb_sdk.workspace`: list, read, write, append, copy, undo, inspect lines;
* :mod:`mlrb_sdk.exec`: run a script of the workspace in the host's sandbox;
* :mod:`mlrb_sdk.episode`: the task, the usage so far, the research log, validation;
* :mod:`mlrb_sdk.llm`: a language model, through the host (the agent holds no key),
  with tool calling and structured answers;
* :mod:`mlrb_sdk.actions`: MLAgentBench's high-level actions;
* :mod:`mlrb_sdk.toolbox`: those actions as tools, and what carries out the model's calls.

Every tool call either returns its value or raises :class:`ToolError`, whose
``kind`` (``"not-found"``, ``"permission-denied"``, ...) and ``message`` say
what the host refused. A refusal is information for the agent, never a crash.

An agent is a subclass of :class:`Agent`, exported under the name
componentize-py looks for::

    from mlrb_sdk import Agent, TaskInfo, episode, exec

    class Baseline(Agent):
        def run(self, task: TaskInfo) -> str:
            episode.note(f"working on {task.name}")
            out = exec.run("train.py")
            return f"train.py ended: {out.termination.name}"

    WitWorld = Baseline.export()

``mlrb agent build <dir>`` turns the project into a ``.wasm`` component
with componentize-py (a dependency of this package). Import every module
the agent needs at the top of its files: the build snapshots the
interpreter after importing them, and the component has no files to import
anything else from later. ``print`` goes to the episode's ``agent.log``.
Outside a component (in an editor, in unit tests) the package imports, but
calling a tool raises ``RuntimeError``.
"""

from __future__ import annotations

from ._core import (
    WIT_PACKAGE,
    Agent,
    AgentError,
    Budget,
    DirEntry,
    EntryKind,
    ExecResult,
    LlmError,
    ScoreReport,
    TaskInfo,
    Termination,
    ToolError,
    Usage,
)
from . import actions, episode, exec, llm, toolbox, workspace

__all__ = [
    "WIT_PACKAGE",
    "Agent",
    "AgentError",
    "Budget",
    "DirEntry",
    "EntryKind",
    "ExecResult",
    "LlmError",
    "ScoreReport",
    "TaskInfo",
    "Termination",
    "ToolError",
    "Usage",
    "actions",
    "episode",
    "exec",
    "llm",
    "toolbox",
    "workspace",
]
__version__ = "0.1.0"
