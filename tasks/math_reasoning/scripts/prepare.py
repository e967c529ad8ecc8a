"""Prepares the held-out evaluation data of the mlrb task `math_reasoning`.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Downloads AlgorithmicResearchGroup/math_reasoning_autoformalization_track (train),
holds out 200 problems (fixed seed) as <hidden_dir>/autoformalization.jsonl (prompt
and reference formal_proof) and writes the others to <public_dir>/data/train.jsonl
for the agent; also <hidden_dir>/wikitext2.txt (information-only perplexity).

mlrb runs this once per task version, with network access (task.toml says
network = true). Every selection uses a fixed seed, so two runs write
identical files as long as the hub data sets do not change;
<hidden_dir>/manifest.json lists the size and SHA-256 of every hidden file.
"""
import os

import mlrb_llm_eval as E


HELD_OUT = 200


def make_prompt(informal_statement, informal_proof):
    return ("Statement in natural language:\n" + informal_statement.strip()
            + "\n\nProof in natural language:\n" + informal_proof.strip()
            + "\n\nLean 3 formal statement and proof:\n")


def build(public, hidden):
    ds = E.hub_dataset("AlgorithmicResearchGroup/math_reasoning_autoformalization_track", None, "train")
    fields = ["name", "informal_statement", "informal_proof", "formal_proof"]
    rows = [{k: ds[i][k] for k in fields} for i in range(len(ds))]
    held = set(E.subsample(len(rows), HELD_OUT, seed=0))
    E.write_jsonl(os.path.join(public, "data", "train.jsonl"), [r for i, r in enumerate(rows) if i not in held])
    E.write_jsonl(os.path.join(hidden, "autoformalization.jsonl"), [
        {"id": f"autoformalization-{i}", "name": rows[i]["name"],
         "prompt": make_prompt(rows[i]["informal_statement"], rows[i]["informal_proof"]),
         "reference": rows[i]["formal_proof"].strip()} for i in sorted(held)])
    with open(os.path.join(hidden, "wikitext2.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(E.build_wikitext2())


if __name__ == "__main__":
    E.prepare_main(build)
