"""Leaves a daemon behind after a script returns and after one that times
out; each time asks whether anything still runs."""

from hostile import script_lines
from mlrb_sdk import Agent, exec


class Background(Agent):
    def run(self, task):
        return "\n".join(
            [
                script_lines("returned", lambda: exec.run("attacks/background.py")),
                script_lines("after return", lambda: exec.run("attacks/heartbeat.py")),
                script_lines("hung", lambda: exec.run("attacks/background.py", ["hang"], timeout_seconds=2)),
                script_lines("after timeout", lambda: exec.run("attacks/heartbeat.py")),
                script_lines("killer", lambda: exec.run("attacks/background.py", ["killer"])),
                script_lines("after killer", lambda: exec.run("attacks/heartbeat.py")),
                script_lines("saturate", lambda: exec.run("attacks/background.py", ["saturate"])),
                script_lines("after saturate", lambda: exec.run("attacks/heartbeat.py")),
            ]
        )


WitWorld = Background.export()
