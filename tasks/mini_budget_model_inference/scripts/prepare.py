"""Prepares the held-out evaluation data of the mlrb task `mini_budget_model_inference`.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Writes <hidden_dir>/wikitext2.txt (WikiText-2 raw test set) and
<hidden_dir>/reference_model/ (AlgorithmicResearchGroup/gpt2-xs re-saved as
safetensors with GPT-2's tokenizer if the repository has none: the unmodified
model whose perplexity sets the limit). Nothing is added to the workspace.

mlrb runs this once per task version, with network access (task.toml says
network = true). Every selection uses a fixed seed, so two runs write
identical files as long as the hub data sets do not change;
<hidden_dir>/manifest.json lists the size and SHA-256 of every hidden file.
"""
import os

import mlrb_llm_eval as E


def build(public, hidden):
    E.save_reference_model("AlgorithmicResearchGroup/gpt2-xs", os.path.join(hidden, "reference_model"),
                           tokenizer_fallback="gpt2")
    with open(os.path.join(hidden, "wikitext2.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(E.build_wikitext2())


if __name__ == "__main__":
    E.prepare_main(build)
