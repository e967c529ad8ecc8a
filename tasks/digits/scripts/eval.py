"""Evaluate a submission of the mlrb `digits` task.

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Reads <workspace_dir>/submission.csv (columns id,label; one row per test id;
label an integer 0-9) and <hidden_dir>/answers.csv, and prints as its last
line of stdout one JSON object: {"score": <accuracy>} for a valid submission,
or {"score": null, "error": "..."} for an invalid one. Exits 0 in both cases;
a non-zero exit means the evaluator itself failed. The submission is read
with mlrb_eval's hostile-input checks (size, regular file, header, ids).
"""
import os

import mlrb_eval

ID_COL, VALUE_COL = "id", "label"
N_CLASSES = 10


def score(workspace, hidden):
    answers = mlrb_eval.read_answers(os.path.join(hidden, "answers.csv"), ID_COL, VALUE_COL, parse_value=int)
    predictions = mlrb_eval.read_submission(
        os.path.join(workspace, "submission.csv"), ID_COL, VALUE_COL,
        expected_ids=answers, parse_value=mlrb_eval.class_label(N_CLASSES),
    )
    correct = sum(1 for i, label in answers.items() if predictions[i] == label)
    return correct / len(answers)


if __name__ == "__main__":
    mlrb_eval.main(score)
