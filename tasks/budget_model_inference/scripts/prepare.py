"""Prepares the held-out evaluation data of the mlrb task `budget_model_inference`.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Writes the 2,800 images of the held-out test split of
AlgorithmicResearchGroup/budget_model_inference to <hidden_dir>/test/ (original
encoded bytes, with labels.jsonl: the digit sums). Nothing is added to the workspace.

mlrb runs this once per task version, with network access (task.toml says
network = true). Every selection uses a fixed seed, so two runs write
identical files as long as the hub data sets do not change;
<hidden_dir>/manifest.json lists the size and SHA-256 of every hidden file.
"""
import os

import mlrb_llm_eval as E


def build(public, hidden):
    ds = E.hub_dataset("AlgorithmicResearchGroup/budget_model_inference", None, "test")
    E.write_image_split(ds, os.path.join(hidden, "test"), "digit_sum")


if __name__ == "__main__":
    E.prepare_main(build)
