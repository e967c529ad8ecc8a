"""A language model, through the host: the host picks the provider for a
model alias, enforces the episode's token and cost budget, and records the
exchange. The agent holds no key. A call is not a step."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from . import _core
from ._core import LlmError, _call

#: (role, content) pairs, role one of "system", "user", "assistant".
Messages = Sequence[Tuple[str, str]]


def complete(
    model: str,
    messages: Messages,
    max_tokens: Optional[int] = None,
    temperature: Optional[float] = None,
    stop: Sequence[str] = (),
):
    """Sends a request; returns the completion (``text``, ``model``,
    ``input_tokens``, ``output_tokens``, ``finish_reason``) or raises
    :class:`LlmError` (``kind``: budget-exhausted, refused, provider,
    timeout, invalid-request, unavailable)."""
    llm = _core._llm
    roles = {"system": llm.Role.SYSTEM, "user": llm.Role.USER, "assistant": llm.Role.ASSISTANT}
    request = llm.Request(
        model=model,
        messages=[llm.Message(role=roles[role], content=content) for role, content in messages],
        max_tokens=max_tokens,
        temperature=temperature,
        stop=list(stop),
    )
    return _call(llm.complete, request, error=LlmError)


def ask(model: str, prompt: str, system: Optional[str] = None, max_tokens: int = 1024) -> str:
    """One question, with an optional system prompt; the answer's text."""
    messages = ([("system", system)] if system else []) + [("user", prompt)]
    return complete(model, messages, max_tokens=max_tokens).text


__all__ = ["LlmError", "Messages", "complete", "ask"]
