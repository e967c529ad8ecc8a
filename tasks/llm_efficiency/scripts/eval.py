"""Evaluator of the mlrb task `llm_efficiency` (LLM efficiency: 1 LLM + 1 GPU + 1 day).

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Scores the Hugging Face model in <workspace>/model/ by its zero-shot accuracy on a
held-out subset of MMLU (30 questions per subject), by log-likelihood of the
answer letters.

Prints a {"details": ...} line with every measurement, then the final JSON
line ({"score": x}, or {"score": null, "error": ...} for an invalid
submission), and exits 0. The measurement code is shared by the tasks of the
ml-research-benchmark suite: mlrb_llm_eval, which mlrb mounts at /mlrb/lib
and puts on PYTHONPATH.
"""
import mlrb_llm_eval as E

# WikiText-2 perplexity, reported for information.
PERPLEXITY = {"file": "wikitext2.txt", "context_length": 1024, "stride": 512, "max_tokens": 100_000}
REQUIREMENTS = {"max_weight_bytes": 32 * E.GiB}
COMPONENTS = [{"name": "mmlu", "type": "choice", "file": "mmlu.jsonl"}]


def score(workspace, hidden):
    return E.evaluate_language_model(workspace, hidden, kind="any", requirements=REQUIREMENTS,
                                     components=COMPONENTS, perplexity_spec=PERPLEXITY)


if __name__ == "__main__":
    E.run(score)
