"""{{name}}: an mlrb agent. It starts as the baseline policy (run the
task's train.py unchanged); make it do better."""

from mlrb_sdk import Agent, AgentError, TaskInfo, ToolError, episode, exec, workspace


class MyAgent(Agent):
    def run(self, task: TaskInfo) -> str:
        episode.note(f"{{name}} on {task.name}: {task.research_problem}")
        files = [entry.path for entry in workspace.list("")]
        episode.note("workspace: " + ", ".join(files))
        try:
            result = exec.run("train.py")
        except ToolError as error:
            raise AgentError(f"train.py: {error.kind}: {error.message}")
        summary = f"train.py ended: {result.termination.name}, exit code {result.exit_code}"
        print(summary)
        return summary


# componentize-py instantiates the class named WitWorld.
WitWorld = MyAgent.export()
