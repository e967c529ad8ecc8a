"""Writes notes of 60 KiB without end, hoping to fill the disk with trace."""

from mlrb_sdk import Agent, episode, workspace


class NoteFlood(Agent):
    def run(self, task):
        workspace.write("submission.csv", "id,label\n")
        text = "n" * (60 << 10)
        for _ in range(1_000_000):
            episode.note(text)
            episode.usage()
        return "the host let a million notes through"


WitWorld = NoteFlood.export()
