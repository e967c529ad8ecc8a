"""Prepares the held-out evaluation data of the mlrb task `llm_efficiency`.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Writes <hidden_dir>/mmlu.jsonl (30 questions per subject of the MMLU test set,
cais/mmlu) and <hidden_dir>/wikitext2.txt (WikiText-2 test, for the information-only
perplexity). Nothing is added to the workspace.

mlrb runs this once per task version, with network access (task.toml says
network = true). Every selection uses a fixed seed, so two runs write
identical files as long as the hub data sets do not change;
<hidden_dir>/manifest.json lists the size and SHA-256 of every hidden file.
"""
import os

import mlrb_llm_eval as E


def build(public, hidden):
    E.write_jsonl(os.path.join(hidden, "mmlu.jsonl"), E.build_mmlu(per_subject=30))
    with open(os.path.join(hidden, "wikitext2.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(E.build_wikitext2())


if __name__ == "__main__":
    E.prepare_main(build)
