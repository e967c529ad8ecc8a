"""Files of the workspace. Paths are relative to the workspace root,
``/``-separated; ``..``, absolute paths and symbolic links never reach
outside it. Each call is one step of the episode's budget."""

from __future__ import annotations

from typing import List

from . import _core
from ._core import DirEntry, _call


def list(dir: str = "") -> List[DirEntry]:  # noqa: A001 - mirrors the Rust SDK's name
    """Lists ``dir`` ("" for the root), sorted by path."""
    return _call(_core._workspace.list_files, dir)


def read(path: str) -> str:
    """Reads a UTF-8 text file (``too-large`` past the host's cap: use :func:`inspect_lines`)."""
    return _call(_core._workspace.read_file, path)


def write(path: str, content: str) -> None:
    """Creates or replaces a file, creating parent folders (the previous version is kept for :func:`undo`)."""
    _call(_core._workspace.write_file, path, content)


def append(path: str, content: str) -> None:
    """Appends to a file, creating it if needed."""
    _call(_core._workspace.append_file, path, content)


def copy(source: str, destination: str) -> None:
    """Copies a file inside the workspace."""
    _call(_core._workspace.copy_file, source, destination)


def undo(path: str) -> str:
    """Restores the version before the last change of ``path``; says what was restored."""
    return _call(_core._workspace.undo_edit, path)


def inspect_lines(path: str, start: int, end: int) -> str:
    """Lines ``start`` to ``end`` (1-based, inclusive) of a text file, numbered."""
    return _call(_core._workspace.inspect_lines, path, start, end)
