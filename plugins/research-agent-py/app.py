"""The research agent in Python: MLAgentBench's method, the same as
plugins/research-agent (Rust), on mlrb_sdk and its high-level actions."""

import json

import prompt
from mlrb_sdk import Agent, LlmError, TaskInfo, ToolError, actions, episode, exec, llm, workspace
from mlrb_sdk.actions import ActionError, Models, ResearchLog

STEPS_IN_CONTEXT = 3
ATTEMPTS = 3
OBSERVATION_LIMIT = 10_000
MODEL = "main"


class Final(Exception):
    """The agent submitted."""


class Stop(Exception):
    """The host will not go on (budget, no model)."""


def _stop_for(error: LlmError) -> None:
    """A spent budget, no model or a rejected request ends the loop; other
    failures are a failed step, told to the model."""
    episode.note(f"llm call failed ({error.kind}): {error.message}")
    if error.kind in ("budget-exhausted", "unavailable", "invalid-request"):
        raise Stop(f"stopped: the model is not available ({error.kind}: {error.message})")


def ask_well_formed(context: str):
    """(response, (action, input) or an error text)."""
    messages = [("user", context)]
    last = ("", "")
    for _ in range(ATTEMPTS):
        try:
            response = llm.complete(MODEL, messages, max_tokens=2000, temperature=0.5, stop=["\nObservation:"]).text
        except LlmError as error:
            _stop_for(error)
            return "", f"EnvError: the model failed ({error.kind}): {error.message}"
        try:
            return response, prompt.parse(response)
        except prompt.Malformed as why:
            episode.note(f"malformed response ({why}); asking again")
            messages += [
                ("assistant", response),
                (
                    "user",
                    f"Your response was not in the required format: {why}. Respond again, exactly in the format given, "
                    "with a valid JSON object as Action Input.",
                ),
            ]
            last = (response, f"The response was not in the required format: {why}")
    return last


def _text(value, key):
    if not isinstance(value.get(key), str):
        raise ActionError(f'Action Input needs "{key}" (a string)')
    return value[key]


def _number(value, key):
    try:
        return int(str(value.get(key)).strip())
    except ValueError:
        raise ActionError(f'Action Input needs "{key}" (a line number)') from None


def act(models: Models, log: ResearchLog, action: str, value: dict) -> str:
    """Runs one action and returns its observation."""
    if action == "Final Answer":
        answer = value.get("final_answer")
        raise Final(answer if isinstance(answer, str) else json.dumps(value))
    try:
        if action == "List Files":
            entries = workspace.list(value.get("dir_path") or ".")
            return "\n".join(
                e.path.rsplit("/", 1)[-1] + ("/" if e.kind.name == "DIRECTORY" else "") for e in entries
            )
        if action == "Copy File":
            source, destination = _text(value, "source"), _text(value, "destination")
            workspace.copy(source, destination)
            return f"File {source} copied to {destination}"
        if action == "Undo Edit Script":
            script = _text(value, "script_name")
            workspace.undo(script)
            return f"Content of {script} after undo the most recent edit:\n{workspace.read(script)}"
        if action == "Execute Script":
            result = exec.run(_text(value, "script_name"))
            output = (
                f"The script has been executed ({result.termination.name}, exit code {result.exit_code}). "
                f"Here is the output:\n{result.stdout}"
            )
            if result.stderr.strip():
                output += f"\nstderr:\n{result.stderr}"
            return output
        if action == "Understand File":
            return actions.understand_file(models, _text(value, "file_name"), _text(value, "things_to_look_for"))
        if action == "Inspect Script Lines":
            return actions.inspect_script_lines(
                _text(value, "script_name"), _number(value, "start_line_number"), _number(value, "end_line_number")
            )
        if action == "Edit Script (AI)":
            script = _text(value, "script_name")
            save_name = value.get("save_name") if isinstance(value.get("save_name"), str) else script
            return actions.edit_script(models, script, _text(value, "edit_instruction"), save_name)
        if action == "Reflection":
            return actions.reflection(models, log, _text(value, "things_to_reflect_on"))
        return f"EnvError: Invalid action: {action}. Use one of: {', '.join(prompt.ACTION_NAMES)}"
    except ToolError as error:
        if error.kind == "budget-exhausted":
            raise Stop(f"stopped: {error.message}") from None
        return f"EnvError: {error.kind}: {error.message}"
    except ActionError as error:
        if isinstance(error.cause, ToolError) and error.cause.kind == "budget-exhausted":
            raise Stop(f"stopped: {error.cause.message}") from None
        if isinstance(error.cause, LlmError):
            _stop_for(error.cause)
        return f"EnvError: {error}"


class ResearchAgent(Agent):
    def run(self, task: TaskInfo) -> str:
        models = Models()
        log = ResearchLog()
        steps = []
        head = prompt.initial(task.research_problem)
        try:
            for number in range(1, task.budget.max_steps + 1):
                context = prompt.with_history(head, log.retrieve(), steps[-STEPS_IN_CONTEXT:])
                response, parsed = ask_well_formed(context)
                if isinstance(parsed, tuple):
                    try:
                        observation = act(models, log, *parsed)
                    except Final as final:
                        log.append(f"Step {number}: submitted the final answer")
                        return str(final)
                else:
                    observation = parsed
                observation = actions.condense_observation(models, response, observation, OBSERVATION_LIMIT)
                log.append(f"Step {number}: {prompt.action_line(response)}\nObservation: {observation[:300]}")
                steps.append((response, observation))
        except Stop as stop:
            return str(stop)
        return f"stopped after {task.budget.max_steps} steps without a final answer"


WitWorld = ResearchAgent.export()
