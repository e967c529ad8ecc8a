"""Evaluate a submission of the mlrb `house-prices` task.

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Reads <workspace_dir>/submission.csv (columns Id,SalePrice; one row per test
Id) and <hidden_dir>/answers.csv, and prints as its last line of stdout one
JSON object: {"score": <mean absolute error>} for a valid submission, or
{"score": null, "error": "..."} for an invalid one. Exits 0 in both cases;
a non-zero exit means the evaluator itself failed. The submission is read
with mlrb_eval's hostile-input checks (size, regular file, header, ids).
"""
import math
import os

import mlrb_eval

ID_COL, VALUE_COL = "Id", "SalePrice"
MAX_ABS_PRICE = 1e12  # keeps the mean finite


def score(workspace, hidden):
    answers = mlrb_eval.read_answers(os.path.join(hidden, "answers.csv"), ID_COL, VALUE_COL, parse_value=float)
    predictions = mlrb_eval.read_submission(
        os.path.join(workspace, "submission.csv"), ID_COL, VALUE_COL,
        expected_ids=answers, parse_value=mlrb_eval.finite_float(MAX_ABS_PRICE),
    )
    ids = sorted(answers)
    return math.fsum(abs(predictions[i] - answers[i]) for i in ids) / len(ids)


if __name__ == "__main__":
    mlrb_eval.main(score)
