#!/usr/bin/env python3
"""How well an agent's model called tools: for each episode directory given
(or found below a run directory), the model requests that offered tools,
how many answers were well-formed calls (the host checks each one against
the tools' schemas; a misfit is recorded as `malformed-answer`), the tools
called, what the episode did for real (files written, scripts run) and its
score. Prints a table and, with --json, one JSON object per episode.

Usage: scripts/tool_calls.py [--json] DIR...
"""

import json
import pathlib
import sys
from collections import Counter


def episodes(paths):
    for path in map(pathlib.Path, paths):
        if (path / "events.jsonl").is_file():
            yield path
        else:
            yield from sorted(p.parent for p in path.rglob("events.jsonl"))


def measure(episode: pathlib.Path) -> dict:
    asked = well_formed = 0
    tools, errors = Counter(), Counter()
    writes = scripts = 0
    for line in (episode / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        interface, function = event.get("interface"), event.get("function")
        result = event.get("result") or {}
        if interface == "llm" and (event.get("args") or {}).get("tools"):
            asked += 1
            calls = (result.get("ok") or {}).get("tool_calls")
            if calls:
                well_formed += 1
                tools.update(call["name"] for call in calls)
            else:
                errors[(result.get("error") or {}).get("kind", "no call")] += 1
        elif interface == "workspace" and function in ("write-file", "append-file", "copy-file") and "ok" in result:
            writes += 1
        elif interface == "exec" and "ok" in result:
            scripts += 1
    record = json.loads((episode / "episode.json").read_text())
    score = json.loads((episode / "score.json").read_text()) if (episode / "score.json").is_file() else {}
    return {
        "episode": str(episode),
        "task": record.get("task", {}).get("name"),
        "asked": asked,
        "well_formed": well_formed,
        "share": well_formed / asked if asked else None,
        "errors": dict(errors),
        "tools": dict(tools),
        "files_written": writes,
        "scripts_run": scripts,
        "score": score.get("score"),
        "baseline": record.get("task", {}).get("baseline"),
        "end": (record.get("end") or {}).get("reason"),
        "wall_s": round(((record.get("end") or {}).get("wall_ms") or 0) / 1000, 1),
    }


def main(argv):
    as_json = "--json" in argv
    rows = [measure(e) for e in episodes(a for a in argv if a != "--json")]
    if not rows:
        sys.exit("tool_calls.py: no episode (a directory with events.jsonl) under " + " ".join(argv))
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"{'task':<12} {'asked':>5} {'well-formed':>11} {'writes':>6} {'scripts':>7} {'score':>8} {'baseline':>8} {'wall':>7}  tools")
    for r in rows:
        share = f"{r['well_formed']} ({r['share']:.0%})" if r["share"] is not None else "-"
        score = f"{r['score']:.4f}" if isinstance(r["score"], (int, float)) else "-"
        baseline = f"{r['baseline']:.4f}" if isinstance(r["baseline"], (int, float)) else "-"
        tools = ", ".join(f"{k} {v}" for k, v in sorted(r["tools"].items(), key=lambda kv: -kv[1]))
        print(f"{r['task'] or '?':<12} {r['asked']:>5} {share:>11} {r['files_written']:>6} {r['scripts_run']:>7} "
              f"{score:>8} {baseline:>8} {r['wall_s']:>6}s  {tools}")


if __name__ == "__main__":
    main(sys.argv[1:])
