"""Prepares the held-out evaluation data of the mlrb task `baby_lm`.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Writes <hidden_dir>/blimp.jsonl (all 67 BLiMP paradigms, nyu-mll/blimp) and
<hidden_dir>/wikitext2.txt (information-only perplexity). Nothing is added to the
workspace: the training corpus is on the hub.

mlrb runs this once per task version, with network access (task.toml says
network = true). Every selection uses a fixed seed, so two runs write
identical files as long as the hub data sets do not change;
<hidden_dir>/manifest.json lists the size and SHA-256 of every hidden file.
"""
import os

import mlrb_llm_eval as E


def build(public, hidden):
    E.write_jsonl(os.path.join(hidden, "blimp.jsonl"), E.build_blimp())
    with open(os.path.join(hidden, "wikitext2.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(E.build_wikitext2())


if __name__ == "__main__":
    E.prepare_main(build)
