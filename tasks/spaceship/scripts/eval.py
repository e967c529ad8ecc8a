"""Evaluate a submission of the mlrb `spaceship` task.

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Reads <workspace_dir>/submission.csv (columns PassengerId,Transported; one row
per test passenger; Transported is True/False, any case, or 1/0) and
<hidden_dir>/answers.csv, and prints as its last line of stdout one JSON
object: {"score": <accuracy>} for a valid submission, or
{"score": null, "error": "..."} for an invalid one. Exits 0 in both cases;
a non-zero exit means the evaluator itself failed.
"""
import os

import mlrb_eval

ID_COL, VALUE_COL = "PassengerId", "Transported"


def score(workspace, hidden):
    answers = mlrb_eval.read_answers(
        os.path.join(hidden, "answers.csv"), ID_COL, VALUE_COL,
        parse_value=lambda text: text == "True", parse_id=str,
    )
    predictions = mlrb_eval.read_submission(
        os.path.join(workspace, "submission.csv"), ID_COL, VALUE_COL,
        expected_ids=answers, parse_value=mlrb_eval.boolean(), parse_id=mlrb_eval.string_id,
    )
    correct = sum(1 for i, label in answers.items() if predictions[i] == label)
    return correct / len(answers)


if __name__ == "__main__":
    mlrb_eval.main(score)
