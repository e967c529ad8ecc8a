"""Attacks the sandbox's init and the host from a script, then checks that
scripts still run (the same attacks as tests/agents/hostile)."""

from hostile import script_lines
from mlrb_sdk import Agent, exec


class Supervisor(Agent):
    def run(self, task):
        attacks = script_lines("supervisor", lambda: exec.run("attacks/supervisor.py"))
        after = script_lines("after", lambda: exec.run("attacks/heartbeat.py"))
        return attacks + "\n" + after


WitWorld = Supervisor.export()
