"""Prepares the held-out evaluation data of the mlrb task `mini_llm_merging`.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Copies the competition's validation examples (AlgorithmicResearchGroup/llm_merging,
configs cosmos_qa and xsum) to <public_dir>/data/, and writes to <hidden_dir>
cosmosqa.jsonl (1,000 CosmosQA validation questions) and xsum.jsonl (200 XSum test
articles), leaving out any that appear in the public examples, and wikitext2.txt
(information-only perplexity).

mlrb runs this once per task version, with network access (task.toml says
network = true). Every selection uses a fixed seed, so two runs write
identical files as long as the hub data sets do not change;
<hidden_dir>/manifest.json lists the size and SHA-256 of every hidden file.
"""
import os

import mlrb_llm_eval as E


def build(public, hidden):
    texts = []
    for config in ("cosmos_qa", "xsum"):
        ds = E.hub_dataset("AlgorithmicResearchGroup/llm_merging", config, "train")
        rows = [{k: ds[i][k] for k in ds.column_names} for i in range(len(ds))]
        name = {"cosmos_qa": "cosmosqa"}.get(config, config)  # public file names: validation_cosmosqa.jsonl
        E.write_jsonl(os.path.join(public, "data", f"validation_{name}.jsonl"), rows)
        texts += [str(r.get("input", "")) for r in rows]
    E.write_jsonl(os.path.join(hidden, "cosmosqa.jsonl"), E.build_cosmosqa(n=1000, exclude_texts=texts))
    E.write_jsonl(os.path.join(hidden, "xsum.jsonl"), E.build_xsum(n=200, exclude_texts=texts))
    with open(os.path.join(hidden, "wikitext2.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(E.build_wikitext2())


if __name__ == "__main__":
    E.prepare_main(build)
