"""Spins forever without calling the host."""

from mlrb_sdk import Agent


class InfiniteLoop(Agent):
    def run(self, task):
        x = 0
        while True:
            x = (x + 1) & 0xFFFFFFFF


WitWorld = InfiniteLoop.export()
