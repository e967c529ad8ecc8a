"""Prepares the held-out evaluation data of the mlrb task `mini_llm_efficiency`.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Writes to <hidden_dir>: mmlu.jsonl (30 per subject), hellaswag.jsonl (1,000),
arc_easy.jsonl (1,000), blimp.jsonl (30 per paradigm), gsm8k.jsonl (250) and
wikitext2.txt (information-only perplexity). Nothing is added to the workspace.

mlrb runs this once per task version, with network access (task.toml says
network = true). Every selection uses a fixed seed, so two runs write
identical files as long as the hub data sets do not change;
<hidden_dir>/manifest.json lists the size and SHA-256 of every hidden file.
"""
import os

import mlrb_llm_eval as E


def build(public, hidden):
    E.write_jsonl(os.path.join(hidden, "mmlu.jsonl"), E.build_mmlu(per_subject=30))
    E.write_jsonl(os.path.join(hidden, "hellaswag.jsonl"), E.build_hellaswag(n=1000))
    E.write_jsonl(os.path.join(hidden, "arc_easy.jsonl"), E.build_arc("ARC-Easy", n=1000))
    E.write_jsonl(os.path.join(hidden, "blimp.jsonl"), E.build_blimp(per_paradigm=30))
    E.write_jsonl(os.path.join(hidden, "gsm8k.jsonl"), E.build_gsm8k(n=250))
    with open(os.path.join(hidden, "wikitext2.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(E.build_wikitext2())


if __name__ == "__main__":
    E.prepare_main(build)
