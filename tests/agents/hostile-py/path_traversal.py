"""Climbs out of the workspace with `..` in every spelling."""

from hostile import outcome
from mlrb_sdk import Agent, ToolError, workspace


class PathTraversal(Agent):
    def run(self, task):
        report = [
            outcome("read ../episode.json", lambda: workspace.read("../episode.json")),
            outcome("read ../../../../etc/passwd", lambda: workspace.read("../../../../etc/passwd")),
            outcome("read data/../../events.jsonl", lambda: workspace.read("data/../../events.jsonl")),
            outcome("list ..", lambda: workspace.list("..")),
            outcome("list ./../..", lambda: workspace.list("./../..")),
            outcome("write ../escaped.txt", lambda: workspace.write("../escaped.txt", "out")),
            outcome("copy train.py ../escaped.py", lambda: workspace.copy("train.py", "../escaped.py")),
            outcome("inspect ../agent.log", lambda: workspace.inspect_lines("../agent.log", 1, 5)),
        ]
        try:
            workspace.read("train.py")
            inside = "true"
        except ToolError:
            inside = "false"
        report.append(f"inside still works: {inside}")
        return "\n".join(report)


WitWorld = PathTraversal.export()
