"""The research agent in Python: MLAgentBench's method, the same as
plugins/research-agent (Rust), on mlrb_sdk's toolbox. ``METHOD`` picks how
the model is asked: ``"tools"`` (tool calling: the host checks every call
against the action's schema) or ``"prompt"`` (MLAgentBench's original
format, the action parsed out of free text)."""

import prompt
from mlrb_sdk import Agent, LlmError, TaskInfo, actions, episode, llm
from mlrb_sdk.toolbox import Toolbox, stops

METHOD = "tools"
STEPS_IN_CONTEXT = 3
ATTEMPTS = 3
OBSERVATION_LIMIT = 10_000
#: Tool-calling turns share the context with the tools' schemas.
TOOL_OBSERVATION_LIMIT = 4_000
MODEL = "main"


class Stop(Exception):
    """The host will not go on (budget, no model)."""


def ask_well_formed(context: str):
    """(response, (action, input) or an error text)."""
    messages = [("user", context)]
    last = ("", "")
    for _ in range(ATTEMPTS):
        try:
            response = llm.complete(MODEL, messages, max_tokens=2000, temperature=0.5, stop=["\nObservation:"]).text
        except LlmError as error:
            why = stops(error)
            if why is not None:
                raise Stop(why) from None
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


def by_prompt(task: TaskInfo) -> str:
    toolbox = Toolbox()
    steps = []
    head = prompt.initial(task.research_problem)
    for number in range(1, task.budget.max_steps + 1):
        context = prompt.with_history(head, toolbox.log.retrieve(), steps[-STEPS_IN_CONTEXT:])
        response, parsed = ask_well_formed(context)
        if isinstance(parsed, tuple):
            outcome = toolbox.run(*parsed)
            if outcome.final is not None:
                toolbox.log.append(f"Step {number}: submitted the final answer")
                return outcome.final
            if outcome.stop is not None:
                return outcome.stop
            observation = outcome.observation
        else:
            observation = parsed
        observation = actions.condense_observation(toolbox.models, response, observation, OBSERVATION_LIMIT)
        toolbox.log.append(f"Step {number}: {prompt.action_line(response)}\nObservation: {observation[:300]}")
        steps.append((response, observation))
    return f"stopped after {task.budget.max_steps} steps without a final answer"


# Tools that look or prepare (a copy is a backup); the others change what a
# run measures or end the episode.
LOOKING = ("list_files", "understand_file", "inspect_script_lines", "reflection", "copy_file")

# Looking calls in a row after which the next call must act.
LOOKS_BEFORE_ACTING = 3


class Progress:
    """What the episode's history makes pointless to offer: running a script
    when nothing changed since the last run observes nothing new; undoing
    needs an edit; after a few looks in a row it is time to act; and the
    final answer waits until a change has been measured (an edit, then a
    run) or the budget is nearly spent, since submitting the starter as it
    is only reproduces the baseline."""

    def __init__(self) -> None:
        self.changed_since_run = True
        self.edits = 0
        self.looks_in_a_row = 0
        self.measured_change = False
        self.last_steps = False

    def record(self, tool: str) -> None:
        """Counts a call that succeeded."""
        self.looks_in_a_row = self.looks_in_a_row + 1 if tool in LOOKING else 0
        if tool == "edit_script":
            self.changed_since_run = True
            self.edits += 1
        elif tool == "undo_edit_script":
            self.changed_since_run = True
            self.edits = max(0, self.edits - 1)
        elif tool == "execute_script":
            self.measured_change |= self.changed_since_run and self.edits > 0
            self.changed_since_run = False

    def pointless(self, tool: str) -> bool:
        if tool == "execute_script":
            return not self.changed_since_run
        if tool == "undo_edit_script":
            return self.edits == 0
        if tool == "final_answer":
            return not self.measured_change and not self.last_steps
        return tool in LOOKING and self.looks_in_a_row >= LOOKS_BEFORE_ACTING


def offered(toolbox: Toolbox, turns: list, progress: Progress) -> list:
    """The tools for the next step: none that ``Progress`` finds pointless,
    and a call the model just made twice in a row is withheld for one step."""
    every = toolbox.tools()
    tools = [t for t in every if not progress.pointless(t["name"])]
    if len(turns) >= 2:
        a, b = turns[-2][0].tool_calls, turns[-1][0].tool_calls
        if a and [(c.name, c.arguments) for c in a] == [(c.name, c.arguments) for c in b]:
            tools = [t for t in tools if all(c.name != t["name"] for c in a)]
    return tools or every


def by_tool_calls(task: TaskInfo) -> str:
    toolbox = Toolbox()
    # One look at the workspace first: the tools then name its files.
    outcome = toolbox.run("List Files", {"dir_path": "."})
    if outcome.stop is not None:
        return outcome.stop
    turns = []
    progress = Progress()
    system = prompt.tool_instructions(task.research_problem)
    asked = well_formed = 0
    try:
        for number in range(1, task.budget.max_steps + 1):
            progress.last_steps = number + 2 > task.budget.max_steps
            log = toolbox.log.retrieve() or "(none: this is the first step)"
            messages = [("system", system), ("user", f"Here is a summary of the steps so far:\n{log}")]
            for turn in turns[-STEPS_IN_CONTEXT:]:
                messages += turn
            asked += 1
            try:
                answer = llm.complete(
                    MODEL, messages, max_tokens=1000, temperature=0.5, tools=offered(toolbox, turns, progress), tool_choice="required"
                )
            except LlmError as error:
                if error.kind == "malformed-answer":
                    toolbox.log.append(f"Step {number}: the answer was not a well-formed call: {error.message}")
                    continue
                why = stops(error)
                if why is not None:
                    return why
                continue
            well_formed += 1
            turn = [llm.assistant_calls(answer)]
            for call in answer.tool_calls:
                outcome = toolbox.call(call)
                if outcome.final is not None:
                    toolbox.log.append(f"Step {number}: submitted the final answer")
                    return outcome.final
                if outcome.stop is not None:
                    return outcome.stop
                if not outcome.observation.startswith("EnvError"):
                    progress.record(call.name)
                what = f"{call.name} {call.arguments}"
                observation = actions.condense_observation(
                    toolbox.models, what, outcome.observation, TOOL_OBSERVATION_LIMIT
                )
                toolbox.log.append(f"Step {number}: {what}\nObservation: {observation[:300]}")
                turn.append(llm.tool_result(call.id, observation))
            turns.append(turn)
        return f"stopped after {task.budget.max_steps} steps without a final answer"
    finally:
        episode.note(f"{well_formed} of {asked} answers were well-formed tool calls")


class ResearchAgent(Agent):
    def run(self, task: TaskInfo) -> str:
        try:
            return by_tool_calls(task) if METHOD == "tools" else by_prompt(task)
        except Stop as stop:
            return str(stop)


WitWorld = ResearchAgent.export()
