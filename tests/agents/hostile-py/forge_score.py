"""Goes after the score of a task whose evaluator runs submitted code
(vectorize), as tests/agents/hostile's forge_score does: a forward() that
leaks the reference solution through its exception's name, then a right,
code that writes its own `ready` and result on the channel, then a right,
fast forward() whose module forges the evaluator's result, tries to read
its result channel, leaves a daemon doing it again and sleeps."""

from forge_payloads import FORGE, LEAK, PREWRITE
from mlrb_sdk import Agent, ToolError, episode, workspace


def validate(label):
    try:
        r = episode.validate()
        return f"{label}: valid={r.valid} score={r.score} message={r.message}"
    except ToolError as error:
        return f"{label}: error {error.kind}: {error.message}"


class ForgeScore(Agent):
    def run(self, task):
        workspace.write("train.py", LEAK)
        leak = validate("leak")
        workspace.write("train.py", PREWRITE)
        prewrite = validate("prewrite")
        workspace.write("train.py", FORGE)
        forged = validate("forged")
        return leak + "\n" + prewrite + "\n" + forged


WitWorld = ForgeScore.export()
