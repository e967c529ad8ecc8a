"""Raises an exception it never catches."""

from mlrb_sdk import Agent, workspace


class AgentPanics(Agent):
    def run(self, task):
        workspace.list("")
        raise RuntimeError("the agent gave up with an uncaught exception")


WitWorld = AgentPanics.export()
