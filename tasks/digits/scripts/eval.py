"""Evaluate a submission of the mlrb `digits` task.

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Reads <workspace_dir>/submission.csv (columns id,label; one row per test id)
and <hidden_dir>/answers.csv, and prints as its last line of stdout one JSON
object: {"score": <accuracy>} for a valid submission, or
{"score": null, "error": "..."} for an invalid one. Exits 0 in both cases;
a non-zero exit means the evaluator itself failed.
"""
import csv
import json
import math
import os
import stat
import sys

SUBMISSION = "submission.csv"
ID_COL, VALUE_COL = "id", "label"
MAX_BYTES = 50 * 1024 * 1024  # never read more than this
MAX_LINE_CHARS = 10_000
N_CLASSES = 10


class Invalid(Exception):
    """The submission is invalid; the message says why (one line)."""


def finish(score=None, error=None):
    if error is None:
        print(json.dumps({"score": round(float(score), 6)}))
    else:
        error = " ".join(str(error).split())[:500]
        print(json.dumps({"score": None, "error": error}))
    sys.exit(0)


def short(value, limit=40):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def read_answers(path):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        assert header == [ID_COL, VALUE_COL], header
        return {int(r[0]): int(r[1]) for r in reader if r}


def parse_id(text):
    if not text:
        raise Invalid(f"empty {ID_COL} (missing value)")
    try:
        value = float(text)
    except ValueError:
        raise Invalid(f"non-numeric {ID_COL} {short(text)}")
    if not math.isfinite(value) or value != int(value):
        raise Invalid(f"{ID_COL} {short(text)} is not an integer")
    return int(value)


def parse_label(text):
    if not text:
        raise Invalid(f"empty {VALUE_COL} (missing value)")
    try:
        value = float(text)
    except ValueError:
        raise Invalid(f"non-numeric {VALUE_COL} {short(text)}")
    if math.isnan(value):
        raise Invalid(f"NaN {VALUE_COL}")
    if not math.isfinite(value) or value != int(value) or not 0 <= value < N_CLASSES:
        raise Invalid(f"{VALUE_COL} {short(text)} is not a class label 0-{N_CLASSES - 1}")
    return int(value)


def read_submission(path, expected_rows):
    """Returns {id: label}; raises Invalid with a one-line reason."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise Invalid(f"{SUBMISSION} missing")
    except OSError as e:
        raise Invalid(f"{SUBMISSION} cannot be read: {e.strerror}")
    if not stat.S_ISREG(st.st_mode):
        raise Invalid(f"{SUBMISSION} is not a regular file")
    if st.st_size > MAX_BYTES:
        raise Invalid(f"{SUBMISSION} is larger than {MAX_BYTES // (1024 * 1024)} MB")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise Invalid(f"{SUBMISSION} cannot be read: {e.strerror}")
    if len(raw) > MAX_BYTES:
        raise Invalid(f"{SUBMISSION} is larger than {MAX_BYTES // (1024 * 1024)} MB")
    if not raw.strip():
        raise Invalid(f"{SUBMISSION} is empty")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Invalid(f"{SUBMISSION} is not UTF-8 text")
    if "\x00" in text:
        raise Invalid(f"{SUBMISSION} contains NUL bytes")

    # Cheap checks before parsing, so that hostile files cannot exhaust memory.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.count("\n") > 2 * expected_rows + 16:
        raise Invalid(f"wrong row count: expected {expected_rows} rows after the header, got far more")
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if any(len(ln) > MAX_LINE_CHARS for ln in lines):
        raise Invalid(f"{SUBMISSION} has a line longer than {MAX_LINE_CHARS} characters")
    if not lines:
        raise Invalid(f"{SUBMISSION} is empty")
    try:
        rows = [next(csv.reader([ln])) for ln in lines]
    except csv.Error as e:
        raise Invalid(f"{SUBMISSION} is not valid CSV: {e}")

    header = [h.strip() for h in rows[0]]
    if sorted(header) != sorted([ID_COL, VALUE_COL]):
        raise Invalid(f"wrong columns: expected {ID_COL},{VALUE_COL}, got {short(','.join(header), 80)}")
    i_id, i_val = header.index(ID_COL), header.index(VALUE_COL)
    if len(rows) - 1 != expected_rows:
        raise Invalid(f"wrong row count: expected {expected_rows} rows after the header, got {len(rows) - 1}")

    predictions = {}
    for row_no, row in enumerate(rows[1:], start=1):
        if len(row) != 2:
            raise Invalid(f"data row {row_no} has {len(row)} fields, expected 2")
        try:
            ident = parse_id(row[i_id].strip())
            value = parse_label(row[i_val].strip())
        except Invalid as e:
            raise Invalid(f"data row {row_no}: {e}")
        if ident in predictions:
            raise Invalid(f"duplicated {ID_COL} {ident}")
        predictions[ident] = value
    return predictions


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: eval.py <workspace_dir> <hidden_dir>")
    workspace, hidden = sys.argv[1], sys.argv[2]
    answers = read_answers(os.path.join(hidden, "answers.csv"))
    try:
        predictions = read_submission(os.path.join(workspace, SUBMISSION), len(answers))
        missing = sorted(set(answers) - set(predictions))
        if missing:
            unknown = sorted(set(predictions) - set(answers))
            raise Invalid(
                f"missing ids: {len(missing)} test id(s) without a prediction (e.g. {missing[0]}); "
                f"unknown ids: {len(unknown)}" + (f" (e.g. {unknown[0]})" if unknown else "")
            )
    except Invalid as e:
        finish(error=e)
    correct = sum(1 for i, label in answers.items() if predictions[i] == label)
    finish(score=correct / len(answers))


if __name__ == "__main__":
    main()
