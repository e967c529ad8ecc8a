"""Gives up with a reason of its own (AgentError)."""

from mlrb_sdk import Agent, AgentError, episode


class GivesUp(Agent):
    def run(self, task):
        episode.note("looked at the task")
        raise AgentError(f"no idea how to improve {task.name}")


WitWorld = GivesUp.export()
