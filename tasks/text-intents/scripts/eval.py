"""Evaluate a submission of the mlrb `text-intents` task.

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Reads <workspace_dir>/submission.csv (columns id,intent; one row per test id;
intent is one of the eight intent names, spelt exactly) and
<hidden_dir>/answers.csv, and prints as its last line of stdout one JSON
object: {"score": <accuracy>} for a valid submission, or
{"score": null, "error": "..."} for an invalid one. Exits 0 in both cases;
a non-zero exit means the evaluator itself failed.
"""
import os

import mlrb_eval

INTENTS = [
    "card_declined", "check_balance", "close_account", "lost_card",
    "refund_request", "transfer_money", "unrecognised_charge", "update_details",
]


def score(workspace, hidden):
    answers = mlrb_eval.read_answers(os.path.join(hidden, "answers.csv"), "id", "intent")
    predictions = mlrb_eval.read_submission(
        os.path.join(workspace, "submission.csv"), "id", "intent",
        expected_ids=answers, parse_value=mlrb_eval.one_of(INTENTS),
    )
    correct = sum(1 for i, intent in answers.items() if predictions[i] == intent)
    return correct / len(answers)


if __name__ == "__main__":
    mlrb_eval.main(score)
