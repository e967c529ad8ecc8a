"""The baseline agent in Python, the same policy as plugins/baseline (Rust):
run the task's starter ``train.py`` unchanged and submit whatever it
produced, so its score is the task's baseline."""

from mlrb_sdk import Agent, AgentError, TaskInfo, Termination, ToolError, episode, exec


class Baseline(Agent):
    def run(self, task: TaskInfo) -> str:
        episode.note(f"baseline on {task.name} {task.version}: running train.py unchanged")
        try:
            result = exec.run("train.py")
        except ToolError as error:
            raise AgentError(f"train.py: {error.kind}: {error.message}")
        if result.termination == Termination.EXITED and result.exit_code == 0:
            summary = "train.py finished"
        elif result.termination == Termination.EXITED:
            summary = f"train.py failed with exit code {result.exit_code}"
        else:
            summary = f"train.py ended: {result.termination.name.lower().replace('_', '-')}"
        episode.note(summary)
        print(summary)
        return summary


WitWorld = Baseline.export()
