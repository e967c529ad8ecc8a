"""A language model, through the host: the host picks the provider for a
model alias, enforces the episode's token and cost budget, and records the
exchange. The agent holds no key. A call is not a step.

Since ``mlrb:agent@0.3.0`` a request may offer tools (dicts with ``name``,
``description`` and ``parameters``, a JSON Schema; :mod:`mlrb_sdk.toolbox`
has the MLAgentBench ones) and ask for JSON of a schema. The host checks
the answer against both: a call that does not fit raises :class:`LlmError`
of kind ``malformed-answer``."""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

from . import _core
from ._core import LlmError, _call

#: Messages: ``(role, content)`` pairs (role ``system``, ``user`` or
#: ``assistant``), or the messages :func:`tool_result` and
#: :func:`assistant_calls` make.
Messages = Sequence[Union[Tuple[str, str], Any]]


def _message(item: Any) -> Any:
    llm = _core._llm
    if not isinstance(item, tuple):
        return item
    role, content = item
    roles = {"system": llm.Role.SYSTEM, "user": llm.Role.USER, "assistant": llm.Role.ASSISTANT, "tool": llm.Role.TOOL}
    return llm.Message(role=roles[role], content=content, tool_calls=[], tool_call_id=None)


def _tool(tool: Mapping[str, Any]) -> Any:
    parameters = tool["parameters"]
    if not isinstance(parameters, str):
        parameters = json.dumps(parameters)
    return _core._llm.Tool(name=tool["name"], description=tool.get("description", ""), parameters=parameters)


def _choice(choice: str) -> Any:
    llm = _core._llm
    fixed = {"auto": llm.ToolChoice_Auto, "required": llm.ToolChoice_Required, "none": llm.ToolChoice_None_}
    return fixed[choice]() if choice in fixed else llm.ToolChoice_Named(choice)


def complete(
    model: str,
    messages: Messages,
    max_tokens: Optional[int] = None,
    temperature: Optional[float] = None,
    stop: Sequence[str] = (),
    tools: Sequence[Mapping[str, Any]] = (),
    tool_choice: str = "auto",
    response_schema: Optional[Union[str, Mapping[str, Any]]] = None,
):
    """Sends a request; returns the completion (``text``, ``model``,
    ``input_tokens``, ``output_tokens``, ``finish_reason``, ``tool_calls``,
    each with ``id``, ``name`` and ``arguments`` as JSON text) or raises
    :class:`LlmError` (``kind``: budget-exhausted, refused, provider,
    timeout, invalid-request, unavailable, malformed-answer).

    ``tool_choice``: ``"auto"``, ``"required"``, ``"none"`` or a tool's name."""
    if _core._llm is None:
        raise RuntimeError("mlrb_sdk tools exist only inside an mlrb agent component (build it with `mlrb agent build`)")
    if response_schema is not None and not isinstance(response_schema, str):
        response_schema = json.dumps(response_schema)
    request = _core._llm.Request(
        model=model,
        messages=[_message(m) for m in messages],
        max_tokens=max_tokens,
        temperature=temperature,
        stop=list(stop),
        tools=[_tool(t) for t in tools],
        tool_choice=_choice(tool_choice),
        response_schema=response_schema,
    )
    return _call(_core._llm.complete, request, error=LlmError)


def assistant_calls(completion: Any) -> Any:
    """The assistant's turn of a completion, with its tool calls: what goes
    into the conversation before the calls' results."""
    llm = _core._llm
    return llm.Message(
        role=llm.Role.ASSISTANT, content=completion.text, tool_calls=list(completion.tool_calls), tool_call_id=None
    )


def tool_result(call_id: str, content: str) -> Any:
    """The result of the tool call ``call_id``, as a message."""
    llm = _core._llm
    return llm.Message(role=llm.Role.TOOL, content=content, tool_calls=[], tool_call_id=call_id)


def ask(model: str, prompt: str, system: Optional[str] = None, max_tokens: int = 1024) -> str:
    """One question, with an optional system prompt; the answer's text."""
    messages = ([("system", system)] if system else []) + [("user", prompt)]
    return complete(model, messages, max_tokens=max_tokens).text


__all__ = ["LlmError", "Messages", "complete", "assistant_calls", "tool_result", "ask"]
