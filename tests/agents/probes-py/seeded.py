"""Answers with draws from `random` and `os.urandom`: the same for the same
--seed, different across seeds."""

import os
import random

from mlrb_sdk import Agent


class Seeded(Agent):
    def run(self, task):
        return f"{random.random()!r} {os.urandom(8).hex()}"


WitWorld = Seeded.export()
