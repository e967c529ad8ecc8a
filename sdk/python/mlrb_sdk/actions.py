"""The MLAgentBench research agent's high-level actions, on top of ``llm``
and ``workspace``, for any agent (the same as the Rust SDK's
``mlrb_sdk::actions``): Understand File, Inspect Script Lines, Edit Script
(AI) with a diff and a backup, Reflection, and the research log. Long
observations are summarised the way the original agent does.

Each action returns the observation text or raises :class:`ActionError`
(wrapping a :class:`ToolError` or :class:`LlmError`, or saying what is wrong
with the input)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import List, Optional

from . import episode, llm, workspace
from ._core import LlmError, ToolError

#: Lines per chunk when a file is read by the model.
CHUNK_LINES = 200
#: Inspect Script Lines shows at most this many lines, as MLAgentBench does.
MAX_INSPECT_LINES = 100


class ActionError(Exception):
    """An action that failed; ``cause`` is the ToolError or LlmError, if any."""

    def __init__(self, message: str, cause: Optional[Exception] = None) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass
class Models:
    """Which model alias each kind of action asks."""

    fast: str = "main"
    edit: str = "main"


def _ask(model: str, prompt: str, max_tokens: int) -> str:
    try:
        return llm.ask(model, prompt, max_tokens=max_tokens)
    except LlmError as error:
        raise ActionError(f"the model failed ({error.kind}): {error.message}", error) from None


def _read(path: str) -> str:
    try:
        return workspace.read(path)
    except ToolError as error:
        raise ActionError(f"{error.kind}: {error.message}", error) from None


def understand_file(models: Models, file: str, things_to_look_for: str) -> str:
    """The model reads ``file`` (in chunks when long) looking for
    ``things_to_look_for``; the per-chunk findings are combined."""
    lines = _read(file).splitlines()
    findings: List[str] = []
    for start in range(0, len(lines), CHUNK_LINES):
        chunk = "\n".join(lines[start : start + CHUNK_LINES])
        end = min(start + CHUNK_LINES, len(lines))
        prompt = (
            f"Given this (partial) file from line {start + 1} to line {end}:\n\n```\n{chunk}\n```\n\n"
            f"Here is a detailed description on what to look for and what should be returned: {things_to_look_for}\n\n"
            "The description should short and also reference crtical lines in the script relevant to what is being looked for. "
            "Only describe what is objectively confirmed by the file content. Do not include guessed numbers. "
            'If you cannot find the answer to certain parts of the request, you should say "In this segment, I cannot find ...".'
        )
        findings.append(_ask(models.fast, prompt, 1024))
    if len(findings) <= 1:
        return findings[0] if findings else f"{file} is empty"
    segments = "\n\n".join(f"Segment {{{i}}}: \n\n{f}" for i, f in enumerate(findings))
    prompt = (
        "Given the relevant observations for each segment of a file, summarize to get a cohesive description of the entire file "
        f"on what to look for and what should be returned: {things_to_look_for}\n{segments}"
    )
    return _ask(models.fast, prompt, 1024)


def inspect_script_lines(script: str, start: int, end: int) -> str:
    """Lines ``start..end`` (at most 100) of a script."""
    if end < start:
        raise ActionError(f"end_line_number {end} is before start_line_number {start}")
    if end - start >= MAX_INSPECT_LINES:
        raise ActionError(f"the number of lines to display is limited to {MAX_INSPECT_LINES}")
    try:
        return workspace.inspect_lines(script, start, end)
    except ToolError as error:
        raise ActionError(f"{error.kind}: {error.message}", error) from None


def code_block(text: str) -> str:
    """The code of the first fenced block of ``text``, or the whole text."""
    open_at = text.find("```")
    if open_at < 0:
        return text.strip() + "\n"
    after = text[open_at + 3 :]
    body = after.split("\n", 1)[1] if "\n" in after else ""
    return body.split("```", 1)[0].rstrip() + "\n"


def unified_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{name}", f"b/{name}", n=3
    )
    return "".join(lines)


def edit_script(models: Models, script: str, instruction: str, save_name: str) -> str:
    """The model rewrites ``script`` following ``instruction``; the result is
    saved as ``save_name`` (the old version kept as ``backup/<save_name>_<n>``
    and for undo) and the diff is returned."""
    try:
        before = workspace.read(script)
    except ToolError as error:
        if error.kind != "not-found":
            raise ActionError(f"{error.kind}: {error.message}", error) from None
        before = ""
    prompt = (
        f"Given this python script:\n    ```python \n    {before}\n    ```\n    Edit the script by following the instruction:\n    {instruction}\n    "
        'Provide the full code after the edit, making no other changes. Start the python code with "```python". \n\n    '
    )
    after = code_block(_ask(models.edit, prompt, 4096))
    try:
        try:
            previous = workspace.read(save_name)
        except ToolError:
            previous = None
        if previous is not None:
            n = 0
            while True:
                try:
                    workspace.read(f"backup/{save_name}_{n}")
                    n += 1
                except ToolError:
                    break
            workspace.write(f"backup/{save_name}_{n}", previous)
        workspace.write(save_name, after)
    except ToolError as error:
        raise ActionError(f"{error.kind}: {error.message}", error) from None
    diff = unified_diff(before, after, save_name)
    return (
        f"The edited file is saved to {save_name}. Here is the diff, please check if the edit is correct and desirable:\n\n{diff}"
    )


@dataclass
class ResearchLog:
    """The research log an agent keeps; every entry also goes to the trace."""

    entries: List[str] = field(default_factory=list)

    def append(self, text: str) -> str:
        episode.note(text)
        self.entries.append(text)
        return "Successfully appended to research log"

    def retrieve(self) -> str:
        return "\n".join(self.entries)


def reflection(models: Models, log: ResearchLog, things_to_reflect_on: str) -> str:
    """The model thinks about ``things_to_reflect_on`` given the research log."""
    prompt = (
        f"We are trying to solve this research problem: {episode.task().research_problem}\n"
        f"Your current research log:\n```\n{log.retrieve()}\n```\n"
        f"Reflect on this: {things_to_reflect_on} \nGive an answer in natural language paragraphs as truthfully as possible. "
    )
    return _ask(models.fast, prompt, 1024)


def condense_observation(models: Models, action: str, observation: str, limit: int) -> str:
    """At most ``limit`` characters: longer observations are summarised by the
    model chunk by chunk, and cut if the model fails."""
    if len(observation) <= limit:
        return observation
    summaries = []
    for start in range(0, len(observation), limit):
        segment = observation[start : start + limit]
        prompt = (
            f"{action}\n\nThe full observation is too long. Given this (partial) observation:\n```\n{segment}\n```\n"
            "Summarize the observation concisely in this format:\n[Observation]: Summarize all relevant details in the observation "
            "objectively\n\nDo not include any result that is guessed rather than directly confirmed by the observation. "
        )
        try:
            summaries.append(llm.ask(models.fast, prompt, max_tokens=512))
        except LlmError:
            return f"{observation[:limit]}\n[observation cut at {limit} characters]"
    return "\n".join(summaries)


__all__ = [
    "ActionError",
    "Models",
    "ResearchLog",
    "code_block",
    "condense_observation",
    "edit_script",
    "inspect_script_lines",
    "reflection",
    "understand_file",
    "unified_diff",
]
