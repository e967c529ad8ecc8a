"""Oversized arguments of every kind, then an answer far larger than the
host keeps."""

from hostile import outcome
from mlrb_sdk import Agent, exec, workspace


class Floods(Agent):
    def run(self, task):
        medium = "m" * (40 << 10)
        report = [
            outcome("one 1 MiB argument", lambda: exec.run("train.py", ["a" * (1 << 20)])),
            outcome("300 arguments", lambda: exec.run("train.py", ["x"] * 300)),
            outcome("400 KiB of arguments", lambda: exec.run("train.py", [medium] * 10)),
            outcome("a 5000-byte path", lambda: workspace.read("p" * 5000)),
            outcome("write 20 MiB", lambda: workspace.write("big.txt", "w" * (20 << 20))),
        ]
        return "\n".join(report) + "\n" + "z" * (5 << 20)


WitWorld = Floods.export()
