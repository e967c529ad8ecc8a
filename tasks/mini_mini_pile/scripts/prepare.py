"""Prepares the held-out evaluation data of the mlrb task `mini_mini_pile`.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Writes <hidden_dir>/glue_<task>.jsonl for CoLA, MNLI (1,000 matched validation
pairs), MRPC, QNLI (1,000), QQP (1,000), RTE, SST-2 and WNLI, and wikitext2.txt
(information-only perplexity). Nothing is added to the workspace.

mlrb runs this once per task version, with network access (task.toml says
network = true). Every selection uses a fixed seed, so two runs write
identical files as long as the hub data sets do not change;
<hidden_dir>/manifest.json lists the size and SHA-256 of every hidden file.
"""
import os

import mlrb_llm_eval as E


def build(public, hidden):
    for task, items in E.build_glue(n_per_task=1000).items():
        E.write_jsonl(os.path.join(hidden, f"glue_{task}.jsonl"), items)
    with open(os.path.join(hidden, "wikitext2.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(E.build_wikitext2())


if __name__ == "__main__":
    E.prepare_main(build)
