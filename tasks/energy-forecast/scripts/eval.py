"""Evaluate a submission of the mlrb `energy-forecast` task.

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Reads <workspace_dir>/submission.csv (columns id,demand; one row per test
hour; demand a finite number of MW) and <hidden_dir>/answers.csv, and prints
as its last line of stdout one JSON object: {"score": <mean absolute error>}
for a valid submission, or {"score": null, "error": "..."} for an invalid
one. Exits 0 in both cases; a non-zero exit means the evaluator itself failed.
"""
import math
import os

import mlrb_eval

MAX_ABS_DEMAND = 1e9  # keeps the mean finite


def score(workspace, hidden):
    answers = mlrb_eval.read_answers(
        os.path.join(hidden, "answers.csv"), "id", "demand", parse_value=float
    )
    predictions = mlrb_eval.read_submission(
        os.path.join(workspace, "submission.csv"), "id", "demand",
        expected_ids=answers, parse_value=mlrb_eval.finite_float(MAX_ABS_DEMAND),
    )
    ids = sorted(answers)
    return math.fsum(abs(predictions[i] - answers[i]) for i in ids) / len(ids)


if __name__ == "__main__":
    mlrb_eval.main(score)
