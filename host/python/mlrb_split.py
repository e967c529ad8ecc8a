"""Splits a task's hidden answers into a public and a private part.

Usage: python3 mlrb_split.py <hidden_dir> <out_dir> <spec-json>

mlrb runs this once, after a task's prepare.py, for a task with a
``[validation.split]`` table: ``episode.validate()`` then scores the public
part and the final score the private one, each with only its own part
mounted. ``spec`` is ``{"file", "id", "stratify", "public", "seed"}``.

Writes ``<out_dir>/hidden-public/`` and ``<out_dir>/hidden-private/``, each
a copy of every hidden file with ``file`` cut to the part's rows (same
header, same order) and ``<file>.ids`` beside it: the id of every row of
both parts, one per line, in the file's order, so that a submission is still
checked against every id (``mlrb_eval.read_answers`` reads it). The split is
a function of the rows and the seed only: the same on every machine.
Rows are assigned within each stratum (the values of ``stratify``): sorted
by a hash of the seed and their id, the first round(public * n) go public.
"""
import csv
import hashlib
import json
import os
import shutil
import sys

PARTS = ("hidden-public", "hidden-private")


def read_rows(path, id_col, stratify):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows:
        sys.exit(f"mlrb: {path} is empty: nothing to split")
    header = rows[0]
    for column in filter(None, (id_col, stratify)):
        if column not in header:
            sys.exit(f"mlrb: {path} has no column {column!r} (its header: {','.join(header)}); "
                     "fix [validation.split] in task.toml")
    return header, [r for r in rows[1:] if r]


def assign(rows, header, id_col, stratify, public, seed):
    """The set of row indexes that go to the public part."""
    i_id = header.index(id_col)
    i_stratum = header.index(stratify) if stratify else None
    strata = {}
    for index, row in enumerate(rows):
        key = row[i_stratum] if i_stratum is not None else ""
        strata.setdefault(key, []).append(index)
    chosen = set()
    for key in sorted(strata):
        members = sorted(strata[key], key=lambda i: hashlib.sha256(f"{seed}\0{rows[i][i_id]}".encode()).digest())
        chosen.update(members[:round(public * len(members))])
    return chosen


def write_part(hidden, out, part, relative, header, rows, ids):
    target = os.path.join(out, part)
    shutil.copytree(hidden, target, symlinks=True)
    path = os.path.join(target, relative)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    with open(path + ".ids", "w", encoding="utf-8") as f:
        f.write("".join(f"{i}\n" for i in ids))


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: mlrb_split.py <hidden_dir> <out_dir> <spec-json>")
    hidden, out, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    path = os.path.join(hidden, spec["file"])
    if not os.path.isfile(path):
        sys.exit(f"mlrb: prepare.py wrote no {spec['file']} in the hidden folder; fix [validation.split] file")
    header, rows = read_rows(path, spec["id"], spec.get("stratify"))
    public = assign(rows, header, spec["id"], spec.get("stratify"), spec["public"], spec["seed"])
    if not public or len(public) == len(rows):
        sys.exit(f"mlrb: a share of {spec['public']} of {len(rows)} rows leaves a part empty")
    ids = [row[header.index(spec["id"])] for row in rows]
    parts = ([r for i, r in enumerate(rows) if i in public], [r for i, r in enumerate(rows) if i not in public])
    for part, part_rows in zip(PARTS, parts):
        write_part(hidden, out, part, spec["file"], header, part_rows, ids)
    print(json.dumps({"public_rows": len(parts[0]), "private_rows": len(parts[1])}))


if __name__ == "__main__":
    main()
