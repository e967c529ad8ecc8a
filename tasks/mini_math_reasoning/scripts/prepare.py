"""Prepares the held-out evaluation data of the mlrb task `mini_math_reasoning`.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Writes to <hidden_dir>: mmlu_high_school_mathematics.jsonl (270 test questions),
mmlu_college_mathematics.jsonl (100), mathqa.jsonl (the MathQA test split) and
wikitext2.txt (information-only perplexity). Nothing is added to the workspace.

mlrb runs this once per task version, with network access (task.toml says
network = true). Every selection uses a fixed seed, so two runs write
identical files as long as the hub data sets do not change;
<hidden_dir>/manifest.json lists the size and SHA-256 of every hidden file.
"""
import os

import mlrb_llm_eval as E


def build(public, hidden):
    for subject in ("high_school_mathematics", "college_mathematics"):
        E.write_jsonl(os.path.join(hidden, f"mmlu_{subject}.jsonl"), E.build_mmlu(subjects=[subject]))
    E.write_jsonl(os.path.join(hidden, "mathqa.jsonl"), E.build_mathqa(n=None))
    with open(os.path.join(hidden, "wikitext2.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(E.build_wikitext2())


if __name__ == "__main__":
    E.prepare_main(build)
