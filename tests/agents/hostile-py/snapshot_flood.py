"""Rewrites a 12 MiB file with new content at every step, so that each
snapshot stores it again: the run record grows until its budget ends the
episode."""

from mlrb_sdk import Agent, workspace


class SnapshotFlood(Agent):
    def run(self, task):
        for round in range(19):
            workspace.write("flood.txt", chr(ord("a") + round) * (12 << 20))
        return "wrote 19 rounds"


WitWorld = SnapshotFlood.export()
