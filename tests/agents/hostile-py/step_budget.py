"""Ignores its step budget and keeps calling tools."""

from mlrb_sdk import Agent, ToolError, workspace


class StepBudget(Agent):
    def run(self, task):
        exhausted = 0
        while exhausted <= 1_000_000:
            try:
                workspace.list("")
            except ToolError:
                exhausted += 1
        return "the host never stopped me"


WitWorld = StepBudget.export()
