"""Prepare the data of the mlrb `digits` task.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Splits scikit-learn's bundled handwritten digits (load_digits: 1797 grey
images of 8x8 pixels, values 0-16, 10 classes) into a labelled training set
and an unlabelled test set, stratified by class, with a fixed seed.

Writes
  <public_dir>/data/train.csv              id,pixel0..pixel63,label
  <public_dir>/data/test.csv               id,pixel0..pixel63
  <public_dir>/data/sample_submission.csv  id,label (all zeros)
  <hidden_dir>/answers.csv                 id,label
The output is byte-identical on every run.
"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

SEED = 20240611
TEST_FRACTION = 0.25


def write_csv(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(",".join(header) + "\n")
        for row in rows:
            f.write(",".join(str(v) for v in row) + "\n")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: prepare.py <public_dir> <hidden_dir>")
    public_dir, hidden_dir = sys.argv[1], sys.argv[2]
    data_dir = os.path.join(public_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    os.makedirs(hidden_dir, exist_ok=True)

    digits = load_digits()
    X = np.rint(digits.data).astype(np.int64)  # integral values 0..16
    y = digits.target.astype(np.int64)

    # Stratified split with a fixed seed.
    rng = np.random.RandomState(SEED)
    train_idx, test_idx = [], []
    for c in range(10):
        idx = np.flatnonzero(y == c)
        idx = idx[rng.permutation(len(idx))]
        n_test = int(round(TEST_FRACTION * len(idx)))
        test_idx.extend(idx[:n_test].tolist())
        train_idx.extend(idx[n_test:].tolist())
    train_idx = np.array(train_idx)[rng.permutation(len(train_idx))]
    test_idx = np.array(test_idx)[rng.permutation(len(test_idx))]

    # Ids: training rows 1..n_train, test rows continue from there.
    n_train = len(train_idx)
    train_ids = np.arange(1, n_train + 1)
    test_ids = np.arange(n_train + 1, n_train + len(test_idx) + 1)

    pixels = ["pixel%d" % i for i in range(X.shape[1])]
    write_csv(
        os.path.join(data_dir, "train.csv"),
        ["id"] + pixels + ["label"],
        ([int(i)] + X[j].tolist() + [int(y[j])] for i, j in zip(train_ids, train_idx)),
    )
    write_csv(
        os.path.join(data_dir, "test.csv"),
        ["id"] + pixels,
        ([int(i)] + X[j].tolist() for i, j in zip(test_ids, test_idx)),
    )
    write_csv(
        os.path.join(data_dir, "sample_submission.csv"),
        ["id", "label"],
        ([int(i), 0] for i in test_ids),
    )
    write_csv(
        os.path.join(hidden_dir, "answers.csv"),
        ["id", "label"],
        ([int(i), int(y[j])] for i, j in zip(test_ids, test_idx)),
    )


if __name__ == "__main__":
    main()
