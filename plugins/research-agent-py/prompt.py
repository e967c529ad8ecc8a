"""The research agent's prompt and the parsing of its answers, after
MLAgentBench's ``agent_research.py`` (the same text as the Rust agent's)."""

import json
from typing import List, Tuple

ACTION_NAMES = [
    "List Files",
    "Copy File",
    "Undo Edit Script",
    "Execute Script",
    "Final Answer",
    "Understand File",
    "Inspect Script Lines",
    "Edit Script (AI)",
    "Reflection",
]

#: (name, description, input fields with their meaning)
TOOLS = [
    (
        "List Files",
        "Use this to navigate the file system.",
        "\"dir_path\": [a valid relative path to a directory, such as \".\" or \"folder1/folder2\"]",
    ),
    (
        "Copy File",
        "Use this to copy a file to a new location with a new name.",
        "\"source\": [a valid file name with relative path to current directory if needed],\n    \"destination\": [a valid file name with relative path to current directory if needed]",
    ),
    (
        "Undo Edit Script",
        "Use this to undo the last edit of the python script.",
        "\"script_name\": [a valid python script name with relative path to current directory if needed]",
    ),
    (
        "Execute Script",
        "Use this to execute the python script. The script must already exist.",
        "\"script_name\": [a valid python script name with relative path to current directory if needed]",
    ),
    (
        "Final Answer",
        "Use this to provide the final answer to the current task.",
        "\"final_answer\": [a detailed description on the final answer]",
    ),
    (
        "Understand File",
        "Use this to read the whole file and understand certain aspects. You should provide detailed description on what to look for and what should be returned. To get a better understanding of the file, you can use Inspect Script Lines action to inspect specific part of the file.",
        "\"file_name\": [a valid file name with relative path to current directory if needed],\n    \"things_to_look_for\": [a detailed description on what to look for and what should returned]",
    ),
    (
        "Inspect Script Lines",
        "Use this to inspect specific part of a python script precisely, or the full content of a short script. The number of lines to display is limited to 100 lines. This is especially helpful when debugging.",
        "\"script_name\": [a valid python script name with relative path to current directory if needed],\n    \"start_line_number\": [a valid line number],\n    \"end_line_number\": [a valid line number]",
    ),
    (
        "Edit Script (AI)",
        "Use this to do a relatively large but cohesive edit over a python script. Instead of editing the script directly, you should describe the edit instruction so that another AI can help you do this.",
        "\"script_name\": [a valid python script name with relative path to current directory if needed. An empty script will be created if it does not exist.],\n    \"edit_instruction\": [a detailed step by step description on how to edit it.],\n    \"save_name\": [a valid file name with relative path to current directory if needed]",
    ),
    (
        "Reflection",
        "Use this to look over all the past steps and reflect. You should provide detailed description on what to reflect on and what should be returned.",
        "\"things_to_reflect_on\": [a detailed description on what to reflect on and what should be returned]",
    ),
]

FORMAT = "Reflection: What does the observation mean? If there is an error, what caused the error and how to debug?\nResearch Plan and Status: The full high level research plan, with current status and confirmed results of each step briefly annotated. It must only include progress that has been made by previous steps. If there is any update, enclose the new update text in double asterisks **like this**. If there is no update, just copy the previous step Research Plan and Status. The high level plan from the previous step should be fully retained, unless it is intentionally revised.\nFact Check: List all objective statements in the updates to Research Plan and Status one by one and point out whether it is guessed versus directly confirmed by the previous observation directly above. Performance numbers can only be confirmed by running the code and observing the output.\nThought: What you are currently doing, what actions to perform and why\nAction: the action to take, should be one of the names of the tools\nAction Input: the input to the action as a valid JSON string"

_INSTRUCTIONS = """You do not know anything about this problem so far. 

Follow these instructions and do not forget them:
- First, come up with a high level plan based on your understanding of the problem and available tools and record it in the Research Plan and Status. You can revise the plan later.
- Research Plan and Status should well organized and succinctly keep track of 1) high level plan (can be revised), 2) what steps have been done and what steps are in progress, 3) short results and conclusions of each step after it has been performed. 
- Research Plan and Status must only include progress that has been made by previous steps. It should not include results not directly confirmed by the previous observation. 
- Performance numbers and estimates can only be confirmed and included in the status by running the code and observing the output.
- You should come up with a good experiment design that addresses the problem, and whenever applicable, define and measure the baseline performance of the relevant system or model before attempting any improvements.
- Follow the plan and try to achieve the goal as straightforwardly as possible.
- Highlight the supporting experiment results and reasoning before drawing any conclusions. 
- Do not try installing any new packages or libraries.
- If you believe you have solved the problem, you can use the Final Answer action to submit your answer. You can only submit once, so double check that you have achieved the goal before submitting.

"""

_HEADERS = [
    "Reflection:",
    "Research Plan and Status:",
    "Fact Check:",
    "Thought:",
    "Action:",
    "Action Input:",
    "Observation:",
]


def initial(research_problem: str) -> str:
    """The part of the prompt that never changes within an episode."""
    tools = [
        f"- {name}:\n{description}\nUsage:\n```\nAction: {name}\nAction Input: {{\n    {fields}\n}}\nObservation: [the result of the action]\n```\n"
        for name, description, fields in TOOLS
    ]
    return (
        "You are a helpful research assistant. You have access to the following tools:\n"
        + "\n".join(tools)
        + f"\n\nResearch Problem: {research_problem}\n\n"
        + _INSTRUCTIONS
        + f"Always respond in this format exactly:\n{FORMAT}\nObservation: \n```\nthe result of the action\n```\n\n"
    )


def tool_instructions(research_problem: str) -> str:
    """The system prompt of the tool-calling method."""
    return (
        "You are a helpful research assistant. You work on the research problem below by calling the tools you are "
        "given, one call per turn, and see each call's result.\n\n"
        + f"Research Problem: {research_problem}\n\n"
        + _INSTRUCTIONS
        + "Each turn, call the one tool that brings you closest to the goal: look at the files, run the training "
        "script to measure the baseline, edit it to improve it, run it again to confirm."
    )


def with_history(head: str, log: str, recent: List[Tuple[str, str]]) -> str:
    """The prompt for the next step: the fixed part, the research log of
    older steps, and the recent (response, observation) steps in full."""
    prompt = head
    if log:
        prompt += f"\n\nHere is a summary of relevant actions and observations you have done:\n```\n{log}\n```\n"
    if not recent:
        prompt += "\n\nNow let's start!\n\n"
    else:
        prompt += "\nHere are the exact several steps you have done most recently (up to 3 steps):\n"
        for response, observation in recent:
            prompt += f"\n{response}\nObservation:\n```\n{observation}\n```\n\n"
    return prompt


def _section(response: str, header: str):
    at = response.find(header)
    if at < 0:
        return None
    rest = response[at + len(header) :]
    ends = [rest.find("\n" + h) for h in _HEADERS]
    ends = [e for e in ends if e >= 0]
    return rest[: min(ends) if ends else len(rest)].strip()


class Malformed(Exception):
    """What is wrong with an answer."""


def parse(response: str):
    """The action and its JSON input; raises Malformed saying what is wrong."""
    action = None
    for line in response.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("Action:"):
            action = stripped[len("Action:") :].strip().strip("*`\"").strip()
            break
    if action is None:
        raise Malformed('no "Action:" line')
    names = [n for n in ACTION_NAMES if n.lower() == action.lower()]
    if not names:
        raise Malformed(f'"{action}" is not one of the tools ({", ".join(ACTION_NAMES)})')
    text = _section(response, "Action Input:")
    if text is None:
        raise Malformed('no "Action Input:"')
    start, end = text.find("{"), text.rfind("}")
    if start < 0:
        raise Malformed("the Action Input has no JSON object")
    if end < start:
        raise Malformed("the Action Input's JSON object is not closed")
    try:
        value = json.loads(text[start : end + 1])
    except json.JSONDecodeError as error:
        raise Malformed(f"the Action Input is not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise Malformed("the Action Input is not a JSON object")
    return names[0], value


def action_line(response: str) -> str:
    """``Action Input`` of a response, for the research log."""
    try:
        name, value = parse(response)
    except Malformed as why:
        return f"(malformed: {why})"
    return f"{name} {json.dumps(value, separators=(',', ':'))}"
