"""Shared pieces of the Python hostile agents, the same report format as
tests/agents/hostile (Rust): one ``<attempt>: <outcome>`` line per attempt."""

from typing import Any, Callable

from mlrb_sdk import ToolError


def outcome(attempt: str, call: Callable[[], Any]) -> str:
    """One line of the report for an attempt that should have been refused."""
    try:
        value = call()
    except ToolError as error:
        if error.kind == "permission-denied":
            return f"{attempt}: denied"
        if error.kind == "not-found":
            return f"{attempt}: not-found"
        return f"{attempt}: refused ({error.kind}: {error.message})"
    return f"{attempt}: ESCAPED {str(value)[:200]}"
