"""Evaluator of the mlrb task `mini_llm_merging` (Mini LLM merging).

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Scores the merged model in <workspace>/model/ (weights of at most 8 GiB) by the mean
of its zero-shot accuracy on 1,000 held-out CosmosQA questions and the ROUGE-L F1 of
its greedy summaries of 200 held-out XSum articles.

Prints a {"details": ...} line with every measurement, then the final JSON
line ({"score": x}, or {"score": null, "error": ...} for an invalid
submission), and exits 0. The measurement code is shared by the tasks of the
ml-research-benchmark suite: mlrb_llm_eval, which mlrb mounts at /mlrb/lib
and puts on PYTHONPATH.
"""
import mlrb_llm_eval as E

# WikiText-2 perplexity, reported for information.
PERPLEXITY = {"file": "wikitext2.txt", "context_length": 1024, "stride": 512, "max_tokens": 100_000}
REQUIREMENTS = {"max_weight_bytes": 8 * E.GiB}
COMPONENTS = [
    {"name": "cosmosqa", "type": "choice", "file": "cosmosqa.jsonl"},
    {"name": "xsum", "type": "rouge_l", "file": "xsum.jsonl", "max_new_tokens": 64, "stop": ["\n"],
     "batch_size": 8},
]


def score(workspace, hidden):
    return E.evaluate_language_model(workspace, hidden, kind="any", requirements=REQUIREMENTS,
                                     components=COMPONENTS, perplexity_spec=PERPLEXITY)


if __name__ == "__main__":
    E.run(score)
