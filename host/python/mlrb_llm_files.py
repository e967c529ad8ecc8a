"""Trusted JSON and JSON-lines files: the hidden data that prepare writes and
the evaluator reads (files from the workspace go through
:func:`mlrb_llm_inspect.read_workspace_json` instead)."""
from __future__ import annotations

import json
import os


def read_json(path):
    """A trusted JSON file (hidden data written by prepare)."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_jsonl(path, limit=None):
    """A trusted JSON-lines file (hidden data written by prepare)."""
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                records.append(json.loads(line))
                if limit is not None and len(records) >= limit:
                    break
    return records


def write_jsonl(path, records):
    """Writes records as JSON lines, byte-for-byte reproducibly."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
