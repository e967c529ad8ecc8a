"""Attacks the launcher that starts the episode's scripts from a script,
then runs a control script whose exit status must come back as it is (the
same attacks as tests/agents/hostile)."""

from hostile import script_lines
from mlrb_sdk import Agent, exec


class Launcher(Agent):
    def run(self, task):
        attacks = script_lines("launcher", lambda: exec.run("attacks/launcher.py"))
        control = script_lines("control", lambda: exec.run("attacks/exit7.py"))
        return attacks + "\n" + control


WitWorld = Launcher.export()
