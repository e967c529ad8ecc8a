"""Shared helpers for the scripts of mlrb tasks (prepare.py and eval.py).

mlrb mounts this file read-only at /mlrb/lib and puts that folder on
PYTHONPATH when it runs a task's ``scripts/prepare.py`` or
``scripts/eval.py``, so a task script can simply ``import mlrb_eval``.
It needs only the Python standard library; numpy scalars and arrays are
accepted wherever numbers are written, but numpy is never imported here.

The evaluator protocol (tasks/README.md): ``eval.py <workspace_dir>
<hidden_dir>`` prints as its last line of stdout one JSON object,
``{"score": <float>}`` for a valid submission or
``{"score": null, "error": "<one line>"}`` for an invalid one, and exits 0
in both cases; a non-zero exit means the evaluator itself failed.

Everything in the workspace is hostile: files are read through
:func:`read_file` (regular files only, symbolic links refused, size-capped
before anything is parsed) and every problem is reported by raising
:class:`Invalid` with a one-line reason.

A complete evaluator::

    import os
    import mlrb_eval

    def score(workspace, hidden):
        answers = mlrb_eval.read_answers(
            os.path.join(hidden, "answers.csv"), "id", "label", parse_value=int)
        predictions = mlrb_eval.read_submission(
            os.path.join(workspace, "submission.csv"), "id", "label",
            expected_ids=answers, parse_value=mlrb_eval.class_label(10))
        return sum(predictions[i] == y for i, y in answers.items()) / len(answers)

    if __name__ == "__main__":
        mlrb_eval.main(score)

A prepare script::

    data_dir, hidden_dir = mlrb_eval.prepare_args()
    mlrb_eval.write_csv(os.path.join(data_dir, "train.csv"), ["id", "x", "y"], rows)
"""
import csv
import json
import math
import numbers
import os
import stat
import sys

__all__ = [
    "checked_lstat", "report", "KINDS", "Answers",
    "MAX_BYTES", "MAX_LINE_CHARS", "Invalid", "finish", "main", "one_line", "short",
    "read_file", "read_text", "read_submission", "read_answers",
    "integer_id", "string_id", "class_label", "finite_float", "probability",
    "one_of", "boolean", "format_cell", "write_csv", "prepare_args", "Run", "run_submission",
    "Timed", "cpu_ratio",
]

MAX_BYTES = 50 * 1024 * 1024  # never read more than this from a workspace file
MAX_LINE_CHARS = 10_000       # longest accepted line of a submission CSV
SCORE_DIGITS = 6              # scores are printed rounded to this many decimals


# The kinds of fault mlrb tells an agent about (host/src/task/feedback.rs):
# the agent hears one fixed sentence per kind, never the message itself.
KINDS = (
    "missing", "not-a-file", "too-large", "empty", "encoding", "format", "header",
    "rows", "value", "duplicate-id", "missing-id", "unknown-id", "code-failed",
    "code-timeout", "wrong-result", "model", "rules", "out-of-range",
)


class Invalid(Exception):
    """The submission is invalid; the message says why (one line, kept in
    mlrb's records for the user). ``kind`` (one of :data:`KINDS`) is what
    the agent may learn of it; without one it learns only that the
    evaluator refused the submission."""

    def __init__(self, message, kind=None):
        super().__init__(message)
        self.kind = kind if kind in KINDS else None

    def prefixed(self, prefix):
        """The same fault, its message prefixed with ``prefix``."""
        return Invalid(f"{prefix}{self}", self.kind)


# ---------------------------------------------------------------------------
# Reporting


def one_line(text, limit=500):
    """``text`` with all whitespace runs collapsed to one space, cut to ``limit`` chars."""
    return " ".join(str(text).split())[:limit]


def short(value, limit=40):
    """``repr(value)``, cut to about ``limit`` characters: safe to quote in an error."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def finish(score=None, error=None, kind=None, folds=None):
    """Prints the final JSON line and exits with status 0.

    ``finish(score=x)``: a valid submission, ``{"score": x}`` with x rounded
    to 6 decimals; a :class:`Timed` score adds its ``spread`` and ``measures``. ``finish(error=e)``: an invalid one,
    ``{"score": null, "error": "<e on one line>", "kind": ...}`` (the kind
    from ``kind`` or an :class:`Invalid` ``error``). A score that is not a
    finite number is an evaluator bug: it raises ValueError (non-zero exit).
    """
    if error is None:
        if score is None:
            raise ValueError("finish() needs a score or an error")
        value = float(score)
        if not math.isfinite(value):
            raise ValueError(f"the evaluator computed a non-finite score: {value!r}")
        result = {"score": round(value, SCORE_DIGITS)}
        if isinstance(score, Timed):
            result.update(score.fields())
        if folds:
            result["folds"] = folds
    else:
        result = {"score": None, "error": one_line(error) or "invalid submission"}
        kind = kind or getattr(error, "kind", None)
        if kind in KINDS:
            result["kind"] = kind
    if os.environ.get("MLRB_SMOKE") == "1":
        # The smoke profile's stand-in data: mlrb keeps this out of every real result.
        result["smoke"] = True
    report(result)
    sys.exit(0)


def report(result):
    """Hands the evaluator's result to mlrb: as the file ``$MLRB_RESULT``
    (a folder only the evaluator's sandbox can write, so nothing else
    running there can forge it), and as the last line printed."""
    line = json.dumps(result)
    path = os.environ.get("MLRB_RESULT")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(line + "\n")
    print(line)
    sys.stdout.flush()


def main(score_fn, argv=None):
    """Runs an evaluator: ``score_fn(workspace_dir, hidden_dir)`` returns the
    score or raises :class:`Invalid`; either way the JSON line is printed and
    the process exits 0. Any other exception propagates (evaluator failure).
    """
    argv = sys.argv if argv is None else argv
    if len(argv) != 3:
        sys.exit("usage: eval.py <workspace_dir> <hidden_dir>")
    try:
        score = score_fn(argv[1], argv[2])
    except Invalid as e:
        finish(error=e)
    folds = int(os.environ.get("MLRB_FOLDS", "0") or 0)
    if folds > 1:
        finish(score=score, folds=_fold_scores(score_fn, argv, folds))
    finish(score=score)


def _fold_scores(score_fn, argv, k):
    """The score on each of ``k`` folds of the answers (for the metric's
    standard error); none when the evaluator does not read its answers
    with :func:`read_answers`."""
    scores = []
    for f in range(k):
        os.environ["MLRB_FOLD"] = f"{f}/{k}"
        try:
            scores.append(round(float(score_fn(argv[1], argv[2])), SCORE_DIGITS))
        finally:
            del os.environ["MLRB_FOLD"]
    return scores if _folds_used[0] else None


class Timed(float):
    """A score measured in rounds (a speed): the float is the score, and
    ``low``/``high`` how far the rounds leave it uncertain (mlrb's
    ``verify`` allows a re-scoring that much), ``rounds`` how many there
    were, ``measures`` other figures kept beside the score in
    ``score.json`` (``{name: number}``, e.g. the median seconds)."""

    def __new__(cls, score, low, high, rounds, measures=None):
        value = super().__new__(cls, score)
        value.low, value.high, value.rounds = float(low), float(high), int(rounds)
        value.measures = {k: float(v) for k, v in (measures or {}).items()}
        return value

    def fields(self):
        for number in (float(self), self.low, self.high, *self.measures.values()):
            if not math.isfinite(number):
                raise ValueError(f"the evaluator computed a non-finite timing: {number!r}")
        if not self.low <= float(self) <= self.high:
            raise ValueError(f"the score {float(self)} lies outside its spread {self.low}-{self.high}")
        digits = lambda v: float(f"{v:.6g}")  # noqa: E731
        low, high = (round(v, SCORE_DIGITS) for v in (self.low, self.high))  # as the score is
        fields = {"spread": {"low": low, "high": high, "rounds": self.rounds}}
        if self.measures:
            fields["measures"] = {k: digits(v) for k, v in self.measures.items()}
        return fields


# A timing goes on past its rounds while its spread is wider than this
# share of the score on either side (its quickest runs disagree: a burst
# took several), up to twice the rounds.
SETTLED_SHARE = 0.1


def cpu_ratio(one_round, rounds, rounds_for=None):
    """A speed measured against a reference, as a :class:`Timed` score.

    ``one_round()`` readies a round (its inputs) and returns two callables,
    ``(subject, reference)``, each running its side once (a timed run of
    :func:`run_submission`, its result checked) and returning the run;
    they are called one right after the other, which goes first
    alternating from round to round, so that whatever the first run of a
    round does to the second (a sandbox torn down beside it) touches both
    alike. ``rounds_for(first_subject)`` may change how many
    rounds there are after the first (at least 2 are run). Where the
    spread is still wider than :data:`SETTLED_SHARE` of the score after
    them, rounds go on until it is not, up to twice as many.

    The score is the least CPU time of the subject's runs over the least of
    the reference's: what a run costs beyond its work (another tenant of
    the machine taking the CPU, cache lost to a neighbour) only ever adds,
    in bursts, so each side's quickest run is the one nearest its work, and
    the ratio of the two is steady where any one round's ratio is not. Its
    spread is that ratio with each side's second-quickest run in place of
    its quickest (``s1/r2`` to ``s2/r1``): narrow when the quickest runs of
    each side agree. The measures are the subject's median ``seconds``
    (wall clock), ``cpu_seconds`` and the reference's
    ``reference_cpu_seconds``. Choose a reference whose call takes a second
    or so: CPU time of a call of a few milliseconds gains 10-15 % under
    load, which the ratio would carry. Raises RuntimeError (the evaluator
    fails: no score) where mlrb measured no CPU time."""
    import statistics
    subjects, references = [], []
    rounds = max(rounds, 2)
    while len(subjects) < rounds or (len(subjects) < 2 * rounds and not _settled(subjects, references)):
        subject, reference = _in_order(one_round(), subject_first=len(subjects) % 2 == 1)
        for run in (subject, reference):
            if run.cpu_seconds is None:
                raise RuntimeError(
                    "mlrb measured no CPU time for a timed run: scoring a speed needs the runs' control "
                    "groups (a host with a writable cgroup, or --sandbox docker)")
        subjects.append(subject)
        references.append(reference)
        if len(subjects) == 1 and rounds_for is not None:
            rounds = max(rounds_for(subject), 2)
    score, low, high = _quickest_ratio(subjects, references)
    median = statistics.median
    measures = {
        "seconds": median(s.seconds for s in subjects),
        "cpu_seconds": median(s.cpu_seconds for s in subjects),
        "reference_cpu_seconds": median(r.cpu_seconds for r in references),
    }
    return Timed(score, low, high, len(subjects), measures)


def _in_order(sides, subject_first):
    """Runs a round's ``(subject, reference)`` callables, the subject
    first or second as told; returns their runs in that pair's order."""
    subject, reference = sides
    if subject_first:
        ran = subject()
        return ran, reference()
    ran = reference()
    return subject(), ran


def _quickest_ratio(subjects, references):
    """(s1/r1, s1/r2, s2/r1): the quickest runs' ratio and its spread."""
    s1, s2 = sorted(max(s.cpu_seconds, 1e-6) for s in subjects)[:2]
    r1, r2 = sorted(max(r.cpu_seconds, 1e-6) for r in references)[:2]
    return s1 / r1, s1 / r2, s2 / r1


def _settled(subjects, references):
    score, low, high = _quickest_ratio(subjects, references)
    return high - score <= SETTLED_SHARE * score and score - low <= SETTLED_SHARE * score


# ---------------------------------------------------------------------------
# Reading workspace files


def _megabytes(n):
    return f"{n / (1024 * 1024):g} MB" if n >= 1024 * 1024 else f"{n} bytes"


def checked_lstat(path, name, folder=False, missing=""):
    """The status of ``path`` itself (a link is never followed); raises
    :class:`Invalid` if it is missing (``missing`` says what to do), cannot
    be read, is a symbolic link, or is not a regular file (a folder when
    ``folder``)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise Invalid(f"{name} missing{missing}", "missing")
    except OSError as e:
        raise Invalid(f"{name} cannot be read: {e.strerror}", "not-a-file")
    if stat.S_ISLNK(st.st_mode):
        real = "save the model in a real folder" if folder else "write a regular file"
        raise Invalid(f"{name} is a symbolic link; {real}", "not-a-file")
    if folder and not stat.S_ISDIR(st.st_mode):
        raise Invalid(f"{name} is not a folder", "not-a-file")
    if not folder and not stat.S_ISREG(st.st_mode):
        raise Invalid(f"{name} is not a regular file", "not-a-file")
    return st


def read_file(path, name=None, max_bytes=MAX_BYTES):
    """The bytes of the workspace file ``path``; raises :class:`Invalid` if it
    is missing, is not a regular file (directories, FIFOs, devices and
    symbolic links are refused), cannot be read or is larger than
    ``max_bytes``. ``name`` is how errors call the file (default: its base name).
    """
    name = name or os.path.basename(path)
    st = checked_lstat(path, name)
    if st.st_size > max_bytes:
        raise Invalid(f"{name} is larger than {_megabytes(max_bytes)}", "too-large")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise Invalid(f"{name} cannot be read: {e.strerror}", "not-a-file")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Invalid(f"{name} is not a regular file", "not-a-file")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as e:
        raise Invalid(f"{name} cannot be read: {e.strerror}", "not-a-file")
    finally:
        os.close(fd)
    if total > max_bytes:
        raise Invalid(f"{name} is larger than {_megabytes(max_bytes)}", "too-large")
    return b"".join(chunks)


def read_text(path, name=None, max_bytes=MAX_BYTES):
    """The workspace file ``path`` as text: as :func:`read_file`, then decoded
    as UTF-8 (a leading byte-order mark is dropped), refusing NUL characters
    and files that hold only whitespace; line ends are normalised to ``\\n``.
    """
    name = name or os.path.basename(path)
    raw = read_file(path, name, max_bytes)
    if not raw.strip():
        raise Invalid(f"{name} is empty", "empty")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Invalid(f"{name} is not UTF-8 text", "encoding")
    if "\x00" in text:
        raise Invalid(f"{name} contains NUL bytes", "encoding")
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ---------------------------------------------------------------------------
# Cell parsers: parse(text, column) -> value, raising Invalid. `text` is
# already stripped of surrounding whitespace.


def _number(text, column):
    if not text:
        raise Invalid(f"empty {column} (missing value)", "value")
    try:
        value = float(text)
    except ValueError:
        raise Invalid(f"non-numeric {column} {short(text)}", "value")
    if math.isnan(value):
        raise Invalid(f"NaN {column}", "value")
    return value


def integer_id(text, column="id"):
    """An integral id such as ``17`` (``17.0`` is accepted too)."""
    value = _number(text, column)
    if not math.isfinite(value) or value != int(value):
        raise Invalid(f"{column} {short(text)} is not an integer", "value")
    return int(value)


def string_id(text, column="id", max_chars=100):
    """A non-empty textual id such as ``0042_01``, compared exactly."""
    if not text:
        raise Invalid(f"empty {column} (missing value)", "value")
    if len(text) > max_chars:
        raise Invalid(f"{column} {short(text)} is longer than {max_chars} characters", "value")
    return text


def class_label(n_classes):
    """Parser of an integer class label 0..n_classes-1."""
    def parse(text, column):
        value = _number(text, column)
        if not math.isfinite(value) or value != int(value) or not 0 <= value < n_classes:
            raise Invalid(f"{column} {short(text)} is not a class label 0-{n_classes - 1}", "value")
        return int(value)
    return parse


def finite_float(max_abs=1e12):
    """Parser of a finite number with ``|value| <= max_abs`` (keeps sums finite)."""
    def parse(text, column):
        value = _number(text, column)
        if not math.isfinite(value) or abs(value) > max_abs:
            raise Invalid(f"{column} {short(text)} is out of range (|value| <= {max_abs:g})", "value")
        return value
    return parse


def probability():
    """Parser of a probability, a number in [0, 1]."""
    def parse(text, column):
        value = _number(text, column)
        if not 0.0 <= value <= 1.0:
            raise Invalid(f"{column} {short(text)} is not a probability in [0, 1]", "value")
        return value
    return parse


def one_of(choices, case_sensitive=True):
    """Parser of one of the strings ``choices`` (returned as spelt in ``choices``)."""
    choices = list(choices)
    table = {c if case_sensitive else c.lower(): c for c in choices}
    shown = ", ".join(choices[:12]) + (", ..." if len(choices) > 12 else "")

    def parse(text, column):
        if not text:
            raise Invalid(f"empty {column} (missing value)", "value")
        key = text if case_sensitive else text.lower()
        if key not in table:
            raise Invalid(f"{column} {short(text)} is not one of: {shown}", "value")
        return table[key]
    return parse


def boolean():
    """Parser of a truth value: True/False (any case) or 1/0."""
    def parse(text, column):
        key = text.lower()
        if key in ("true", "1", "1.0"):
            return True
        if key in ("false", "0", "0.0"):
            return False
        if not text:
            raise Invalid(f"empty {column} (missing value)", "value")
        raise Invalid(f"{column} {short(text)} is not True or False", "value")
    return parse


# ---------------------------------------------------------------------------
# Submissions and answers


def read_submission(path, id_col, value_col, expected_ids, parse_value,
                    parse_id=integer_id, name=None, max_bytes=MAX_BYTES,
                    max_line_chars=MAX_LINE_CHARS):
    """Reads a submission CSV with one row per expected id; returns {id: value}.

    ``value_col`` is one column name (the value is ``parse_value(text, col)``)
    or a list of names (the value is a tuple, one parsed cell per column).
    The header must hold exactly ``id_col`` and the value column(s), in any
    order. The file is refused (:class:`Invalid`) if it is missing, not a
    regular file, over ``max_bytes``, not UTF-8, has NUL bytes, a line over
    ``max_line_chars``, far too many lines (checked before parsing), the
    wrong columns or row count, a malformed cell, a duplicated id, or ids
    that differ from ``expected_ids`` (missing or unknown ones).
    """
    name = name or os.path.basename(path)
    value_cols = [value_col] if isinstance(value_col, str) else list(value_col)
    columns = [id_col] + value_cols
    scored = getattr(expected_ids, "all_ids", None) is not None
    expected_list = list(expected_ids.all_ids if scored else expected_ids)
    expected = set(expected_list)
    n_expected = len(expected)

    text = read_text(path, name, max_bytes)
    # Cheap checks before parsing, so that hostile files cannot exhaust memory.
    if text.count("\n") > 2 * n_expected + 16:
        raise Invalid(f"wrong row count: expected {n_expected} rows after the header, got far more", "rows")
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        raise Invalid(f"{name} is empty", "empty")
    if any(len(ln) > max_line_chars for ln in lines):
        raise Invalid(f"{name} has a line longer than {max_line_chars} characters", "format")
    try:
        rows = [next(csv.reader([ln])) for ln in lines]
    except csv.Error as e:
        raise Invalid(f"{name} is not valid CSV: {e}", "format")

    header = [h.strip() for h in rows[0]]
    if sorted(header) != sorted(columns):
        raise Invalid(f"wrong columns: expected {','.join(columns)}, got {short(','.join(header), 80)}", "header")
    i_id = header.index(id_col)
    i_vals = [header.index(c) for c in value_cols]
    if len(rows) - 1 != n_expected:
        raise Invalid(f"wrong row count: expected {n_expected} rows after the header, got {len(rows) - 1}", "rows")

    predictions = {}
    for row_no, row in enumerate(rows[1:], start=1):
        if len(row) != len(columns):
            raise Invalid(f"data row {row_no} has {len(row)} fields, expected {len(columns)}", "format")
        try:
            ident = parse_id(row[i_id].strip(), id_col)
            values = tuple(parse_value(row[i].strip(), c) for i, c in zip(i_vals, value_cols))
        except Invalid as e:
            raise e.prefixed(f"data row {row_no}: ")
        if ident in predictions:
            raise Invalid(f"duplicated {id_col} {short(ident)}", "duplicate-id")
        predictions[ident] = values[0] if isinstance(value_col, str) else values

    missing = [i for i in expected_list if i not in predictions]
    if missing:
        unknown = [i for i in predictions if i not in expected]
        raise Invalid(
            f"missing ids: {len(missing)} expected {id_col}(s) without a prediction "
            f"(e.g. {short(missing[0])}); unknown ids: {len(unknown)}"
            + (f" (e.g. {short(unknown[0])})" if unknown else ""),
            "unknown-id" if unknown else "missing-id",
        )
    if scored:
        # One part of the test set is scored: its rows' predictions only.
        return {i: predictions[i] for i in expected_ids}
    return predictions


class Answers(dict):
    """{id: answer} of the rows an evaluation scores. ``all_ids`` are the
    ids a submission must have rows for: every row of the test set, also
    when only one part of it (the public or the private one) is scored."""

    all_ids = None


def read_answers(path, id_col, value_col, parse_value=str, parse_id=int):
    """Reads a trusted answers CSV written by prepare.py; returns
    :class:`Answers` ({id: value} in file order). ``parse_value`` and
    ``parse_id`` take the cell text only.

    Where mlrb scores one part of a split test set (``[validation.split]``),
    the file holds that part's rows and ``<path>.ids`` every id: the
    answers are the part's, ``all_ids`` every id, and
    :func:`read_submission` checks the submission against all of them and
    returns the part's predictions. When mlrb measures the metric's
    standard error (``MLRB_FOLD=f/k``), only every k-th row from the f-th is kept.
    """
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        i_id, i_val = header.index(id_col), header.index(value_col)
        answers = Answers()
        for row in reader:
            if row:
                answers[parse_id(row[i_id])] = parse_value(row[i_val])
    if not answers:
        raise ValueError(f"{path}: no answers")
    if os.path.isfile(path + ".ids"):
        with open(path + ".ids", encoding="utf-8") as f:
            answers.all_ids = [parse_id(line.strip()) for line in f if line.strip()]
    return _fold(answers)


def _fold(answers):
    """The rows of the fold ``MLRB_FOLD`` names (``f/k``), or all of them."""
    fold = os.environ.get("MLRB_FOLD")
    if not fold:
        return answers
    f, k = (int(n) for n in fold.split("/"))
    _folds_used[0] = True
    kept = Answers((i, a) for n, (i, a) in enumerate(answers.items()) if n % k == f)
    kept.all_ids = answers.all_ids if answers.all_ids is not None else list(answers)
    return kept


_folds_used = [False]


# ---------------------------------------------------------------------------
# Running submitted code (tasks whose task.toml says [scoring] submission = "code")


class Run:
    """How one run of submitted code ended (see :func:`run_submission`).

    ``termination`` is ``exited``, ``timed-out``, ``out-of-memory`` or
    ``killed``; ``exit_code`` the exit code when it exited; ``result`` the
    bytes it sent on its channel (``None`` without a complete one);
    ``seconds`` mlrb's own measure of a timed run (from its ``ready`` to the
    result's last byte) or of the whole run; ``cpu_seconds`` the CPU time
    the timed run's processes used in that span, as mlrb read it from the
    run's control group (``None`` where the sandbox has none): unlike
    ``seconds`` it does not grow with the machine's load; ``outputs`` the folder where
    what it wrote to ``/mlrb/output`` was copied (regular files and folders
    only, sparse files sparse) and ``outputs_left_out`` how many entries
    (links, special files) were not; ``stderr`` the end of what it printed
    (for the records: never tell it to the agent). A run whose output
    folder grew past mlrb's bounds never gets here: :func:`run_submission`
    raises :class:`Invalid` for it."""

    def __init__(self, reply, folder):
        self.termination = reply.get("termination")
        self.exit_code = reply.get("exit_code")
        self.seconds = reply.get("seconds")
        self.cpu_seconds = reply.get("cpu_seconds")
        self.stderr = reply.get("stderr", "")
        self.outputs = os.path.join(folder, "out")
        self.outputs_left_out = (reply.get("outputs") or {}).get("left_out", 0)
        self.result = None
        if reply.get("result"):
            with open(os.path.join(folder, "result"), "rb") as f:
                self.result = f.read()


_runner = {"socket": None, "stream": None, "count": 0}


def _runner_stream():
    """The connection to mlrb's submission runner, made once."""
    import socket
    if _runner["stream"] is None:
        path = os.environ.get("MLRB_RUNNER")
        if not path:
            raise RuntimeError("no submission runner: the task must say [scoring] submission = \"code\" "
                               "in its task.toml to run submitted code")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        _runner["socket"], _runner["stream"] = sock, sock.makefile("rwb", buffering=0)
    return _runner["stream"]


def _runner_call(request):
    stream = _runner_stream()
    stream.write(json.dumps(request).encode() + b"\n")
    line = stream.readline()
    if not line:
        raise RuntimeError("the submission runner closed its connection")
    reply = json.loads(line)
    if reply.get("refused"):
        raise RuntimeError("the submission runner refused a run: " + reply["refused"])
    return reply


# The part of a run's harness that speaks the channel (insert it after the
# harness has loaded its inputs): opens $MLRB_CHANNEL (and a timed run's
# $MLRB_GO) and defines send(data), which writes all of data; ready(), which
# starts mlrb's clocks (it says `ready`, then waits on $MLRB_GO until mlrb
# has read the run's CPU time); and send_array(array), which sends a numpy
# array as the run's result (its length as 8 little-endian bytes, then
# .npy) and, in a timed run, then waits, idle, until mlrb ends the run.
HARNESS_CHANNEL = r"""
import os
_channel = os.open(os.environ["MLRB_CHANNEL"], os.O_WRONLY)
_go = os.open(os.environ["MLRB_GO"], os.O_RDONLY) if "MLRB_GO" in os.environ else None
def send(data):
    view = memoryview(data)
    while view:
        view = view[os.write(_channel, view):]
def ready():
    send(b"ready\n")
    if _go is not None:
        os.read(_go, 3)
def send_array(array):
    import io
    import numpy
    buffer = io.BytesIO()
    numpy.save(buffer, numpy.asarray(array), allow_pickle=False)
    payload = buffer.getvalue()
    send(len(payload).to_bytes(8, "little") + payload)
    if _go is not None:
        os.read(_go, 1)
"""


def run_submission(argv, inputs=None, timeout=60.0, timed=False, result_max_bytes=64 << 20):
    """Runs submitted code in a sandbox of its own and returns a :class:`Run`.

    Submitted code never runs in the evaluator's sandbox: mlrb starts each
    run fresh (its own control group or container, killed as a whole when
    it ends) with the workspace read-only at ``/workspace``, ``inputs``
    (``{name: bytes or str}``) read-only at ``/mlrb/in/<name>``, a scratch
    ``/mlrb/output``, the working directory ``/tmp``, no network, the task's
    limits, and neither the hidden files nor this evaluator in reach.

    The run's program (usually a harness of the evaluator's own, passed in
    ``inputs`` and started as ``["python3", "-I", "/mlrb/in/harness.py"]``)
    hands its result back on the channel ``$MLRB_CHANNEL`` (a FIFO: open it
    with ``open(os.environ["MLRB_CHANNEL"], "wb", buffering=0)``): the
    result's length as 8 little-endian bytes, then its bytes. A ``timed``
    run first writes ``b"ready\\n"`` there, once its inputs are loaded and
    before any submitted code runs, and waits for ``go`` on ``$MLRB_GO``
    (``ready()`` of :data:`HARNESS_CHANNEL` does both); mlrb's clocks (wall
    and CPU time) run from that line to the result's last byte, and the run
    is ended as soon as the result is in. A timed run's numerical libraries
    get one thread each (``OMP_NUM_THREADS=1`` and the like): CPU time sums
    threads, and a pool's idle threads may spin.
    A run whose ``/mlrb/output`` grows past mlrb's bounds (256 MiB, each
    file counted whole even where sparse, or 4096 entries) is stopped and
    refused: this raises :class:`Invalid` (kind ``too-large`` or ``rules``).
    """
    _runner["count"] += 1
    name = f"run-{os.getpid()}-{_runner['count']}"
    folder = os.path.join(os.environ.get("MLRB_EXCHANGE", "/mlrb/exchange"), name)
    os.makedirs(folder)
    for file_name, content in (inputs or {}).items():
        if "/" in file_name or file_name in ("", ".", "..", "out", "result"):
            raise ValueError(f"input name {file_name!r} must be a plain file name")
        data = content.encode() if isinstance(content, str) else content
        with open(os.path.join(folder, file_name), "wb") as f:
            f.write(data)
    reply = _runner_call({
        "argv": list(argv), "folder": name, "timeout_s": float(timeout),
        "timed": bool(timed), "result_max_bytes": int(result_max_bytes),
    })
    if reply.get("termination") == "outputs-too-large":
        outputs = reply.get("outputs") or {}
        kind = "too-large" if outputs.get("over") == "bytes" else "rules"
        raise Invalid("the submitted code's run was refused: " + str(outputs.get("refused")), kind)
    return Run(reply, folder)


# ---------------------------------------------------------------------------
# Writing data (prepare scripts)


def format_cell(value):
    """Deterministic CSV text of one value: None and NaN as an empty cell,
    booleans as True/False, integral numbers without decimals, other floats
    in Python's shortest round-trip form, anything else with ``str``.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if type(value).__name__ in ("bool", "bool_"):
        return "True" if value else "False"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        value = float(value)
        if math.isnan(value):
            return ""
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    return str(value)


def write_csv(path, header, rows, fmt=format_cell):
    """Writes a CSV file (UTF-8, ``\\n`` line ends, minimal quoting) with the
    given header and rows (iterables of values, formatted by ``fmt``). The
    bytes depend only on the values, so prepare scripts stay deterministic.
    """
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow([fmt(v) for v in row])


def prepare_args(argv=None, data_subdir="data"):
    """Parses ``prepare.py <public_dir> <hidden_dir>``, creates
    ``<public_dir>/<data_subdir>`` and ``<hidden_dir>``, and returns both paths.
    """
    argv = sys.argv if argv is None else argv
    if len(argv) != 3:
        sys.exit("usage: prepare.py <public_dir> <hidden_dir>")
    data_dir = os.path.join(argv[1], data_subdir) if data_subdir else argv[1]
    os.makedirs(data_dir, exist_ok=True)
    os.makedirs(argv[2], exist_ok=True)
    return data_dir, argv[2]
