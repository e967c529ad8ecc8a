"""Prepares the held-out evaluation data of the mlrb task `mini_edge_llm_training`.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Writes <hidden_dir>/superglue_<task>.jsonl for BoolQ (1,000 validation questions),
CB, COPA, RTE, WiC and WSC (whole validation sets) and <hidden_dir>/wikitext2.txt
(information-only perplexity). Nothing is added to the workspace.

mlrb runs this once per task version, with network access (task.toml says
network = true). Every selection uses a fixed seed, so two runs write
identical files as long as the hub data sets do not change;
<hidden_dir>/manifest.json lists the size and SHA-256 of every hidden file.
"""
import os

import mlrb_llm_eval as E


def build(public, hidden):
    for task, items in E.build_superglue(n_per_task=1000).items():
        E.write_jsonl(os.path.join(hidden, f"superglue_{task}.jsonl"), items)
    with open(os.path.join(hidden, "wikitext2.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(E.build_wikitext2())


if __name__ == "__main__":
    E.prepare_main(build)
