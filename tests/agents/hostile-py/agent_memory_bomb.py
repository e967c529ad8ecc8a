"""Allocates until something stops it."""

from mlrb_sdk import Agent


class AgentMemoryBomb(Agent):
    def run(self, task):
        hoard = []
        while True:
            hoard.append(bytearray(b"\x01" * (16 << 20)))


WitWorld = AgentMemoryBomb.export()
