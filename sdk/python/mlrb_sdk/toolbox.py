"""The MLAgentBench action set as tools (the same as the Rust SDK's
``mlrb_sdk::toolbox``): :func:`tools` gives their definitions for a
tool-calling request (``mlagentbench-tools.json``, read when the agent is
built), and a :class:`Toolbox` carries out a call. A tool-calling agent is
then a few lines::

    toolbox = Toolbox()
    messages = [("user", "Improve train.py's accuracy.")]
    while True:
        answer = llm.complete("main", messages, tools=tools(), tool_choice="required")
        messages.append(llm.assistant_calls(answer))
        for call in answer.tool_calls:
            outcome = toolbox.call(call)
            if outcome.final is not None or outcome.stop is not None:
                return outcome.final or outcome.stop
            messages.append(llm.tool_result(call.id, outcome.observation))
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, List, Optional

from . import actions, episode, exec, workspace
from ._core import LlmError, ToolError
from .actions import ActionError, Models, ResearchLog

with open(os.path.join(os.path.dirname(__file__), "mlagentbench-tools.json"), encoding="utf-8") as _file:
    #: Each action: ``name`` (the tool's), ``action`` (MLAgentBench's), ``description``, ``parameters``.
    ACTIONS: List[dict] = json.load(_file)


def tools() -> List[dict]:
    """The actions as tools of :func:`mlrb_sdk.llm.complete`."""
    return [{"name": a["name"], "description": a["description"], "parameters": a["parameters"]} for a in ACTIONS]


@dataclass
class Outcome:
    """What came of a call: an observation, the final answer, or why the host will not go on."""

    observation: str = ""
    final: Optional[str] = None
    stop: Optional[str] = None


def stops(error: LlmError) -> Optional[str]:
    """Why an LLM failure ends the loop (a spent budget, no model, a
    request the host rejects), or None when it is just a failed step."""
    episode.note(f"llm call failed ({error.kind}): {error.message}")
    if error.kind in ("budget-exhausted", "unavailable", "invalid-request"):
        return f"stopped: the model is not available ({error.kind}: {error.message})"
    return None


def _text(value: dict, key: str) -> str:
    if not isinstance(value.get(key), str):
        raise ActionError(f'the input needs "{key}" (a string)')
    return value[key]


def _number(value: dict, key: str) -> int:
    try:
        return int(str(value.get(key)).strip())
    except ValueError:
        raise ActionError(f'the input needs "{key}" (a line number)') from None


def _execute(script: str) -> str:
    result = exec.run(script)
    output = (
        f"The script has been executed ({result.termination.name}, exit code {result.exit_code}). "
        f"Here is the output:\n{result.stdout}"
    )
    if result.stderr.strip():
        output += f"\nstderr:\n{result.stderr}"
    return output


#: (tool, input, scripts only): inputs that must name a file the workspace has.
_EXISTING = [
    ("execute_script", "script_name", True),
    ("inspect_script_lines", "script_name", True),
    ("undo_edit_script", "script_name", True),
    ("understand_file", "file_name", False),
    ("copy_file", "source", False),
]


@dataclass
class Toolbox:
    """Carries out actions: the models the LLM-backed ones ask, the research
    log, and the files it knows the workspace has."""

    models: Models = field(default_factory=Models)
    log: ResearchLog = field(default_factory=ResearchLog)
    files: set = field(default_factory=set)

    def tools(self) -> List[dict]:
        """The tools, with every input that must name an existing file
        narrowed to the files the toolbox knows of."""
        narrowed = json.loads(json.dumps(tools()))
        for tool in narrowed:
            for name, key, scripts in _EXISTING:
                known = sorted(f for f in self.files if not scripts or f.endswith((".py", ".sh")))
                if tool["name"] == name and known:
                    tool["parameters"]["properties"][key]["enum"] = known
        return narrowed

    def call(self, call: Any) -> Outcome:
        """Carries out a tool call (``name``, ``arguments`` as JSON text)."""
        action = next((a["action"] for a in ACTIONS if a["name"] == call.name), None)
        if action is None:
            return Outcome(f"EnvError: no tool {call.name!r}")
        try:
            value = json.loads(call.arguments)
        except ValueError as error:
            return Outcome(f"EnvError: the arguments are not JSON: {error}")
        value = value if isinstance(value, dict) else {}
        outcome = self.run(action, value)
        if outcome.final is None and outcome.stop is None and not outcome.observation.startswith("EnvError"):
            for key in ("destination", "save_name"):
                if isinstance(value.get(key), str) and value[key].strip():
                    self.files.add(value[key].removeprefix("./"))
        return outcome

    def run(self, action: str, value: dict) -> Outcome:
        """Carries out an action by its MLAgentBench name with its input."""
        if action == "Final Answer":
            answer = value.get("final_answer")
            return Outcome(final=answer if isinstance(answer, str) else json.dumps(value))
        try:
            return Outcome(self._observe(action, value))
        except ToolError as error:
            if error.kind == "budget-exhausted":
                return Outcome(stop=f"stopped: {error.message}")
            return Outcome(f"EnvError: {error.kind}: {error.message}")
        except ActionError as error:
            cause = error.cause
            if isinstance(cause, ToolError) and cause.kind == "budget-exhausted":
                return Outcome(stop=f"stopped: {cause.message}")
            if isinstance(cause, LlmError):
                why = stops(cause)
                if why is not None:
                    return Outcome(stop=why)
            return Outcome(f"EnvError: {error}")

    def _observe(self, action: str, value: dict) -> str:
        models = self.models
        if action == "List Files":
            entries = workspace.list(value.get("dir_path") or ".")
            self.files.update(e.path for e in entries if e.kind.name == "FILE")
            return "\n".join(e.path.rsplit("/", 1)[-1] + ("/" if e.kind.name == "DIRECTORY" else "") for e in entries)
        if action == "Copy File":
            source, destination = _text(value, "source"), _text(value, "destination")
            workspace.copy(source, destination)
            return f"File {source} copied to {destination}"
        if action == "Undo Edit Script":
            script = _text(value, "script_name")
            workspace.undo(script)
            return f"Content of {script} after undo the most recent edit:\n{workspace.read(script)}"
        if action == "Execute Script":
            return _execute(_text(value, "script_name"))
        if action == "Understand File":
            return actions.understand_file(models, _text(value, "file_name"), _text(value, "things_to_look_for"))
        if action == "Inspect Script Lines":
            return actions.inspect_script_lines(
                _text(value, "script_name"), _number(value, "start_line_number"), _number(value, "end_line_number")
            )
        if action == "Edit Script (AI)":
            script = _text(value, "script_name")
            save_name = value.get("save_name")
            save_name = save_name if isinstance(save_name, str) and save_name.strip() else script
            return actions.edit_script(models, script, _text(value, "edit_instruction"), save_name)
        if action == "Reflection":
            return actions.reflection(models, self.log, _text(value, "things_to_reflect_on"))
        names = ", ".join(a["action"] for a in ACTIONS)
        raise ActionError(f"Invalid action: {action}. Use one of: {names}")


__all__ = ["ACTIONS", "Outcome", "Toolbox", "stops", "tools"]
