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


def script_lines(attempt: str, call: Callable[[], Any]) -> str:
    """A script's stdout as report lines, each prefixed with ``attempt``,
    and how it ended; or how the call failed."""
    try:
        result = call()
    except ToolError as error:
        return f"{attempt}: error {error.kind}: {error.message}"
    lines = [f"{attempt}> {line}" for line in result.stdout.splitlines()]
    ending = result.termination.name.lower().replace("_", "")
    lines.append(f"{attempt}: termination={ending} exit={result.exit_code}")
    return "\n".join(lines)
