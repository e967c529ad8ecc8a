"""Makes one host call, then sits idle (asleep on the host's clock) for
three seconds: what agents waiting on a model or a script look like to
the host."""

import time

from mlrb_sdk import Agent, episode


class Idle(Agent):
    def run(self, task):
        episode.note("idle")
        time.sleep(3)
        return "rested"


WitWorld = Idle.export()
