"""Evaluator of the mlrb task `baby_lm` (BabyLM: pretraining on 10 million words).

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Scores the causal language model in <workspace>/model/ by its accuracy on all
67,000 BLiMP minimal pairs.

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
COMPONENTS = [{"name": "blimp", "type": "pairs", "file": "blimp.jsonl"}]


def score(workspace, hidden):
    return E.evaluate_language_model(workspace, hidden, kind="causal", requirements=REQUIREMENTS,
                                     components=COMPONENTS, perplexity_spec=PERPLEXITY)


if __name__ == "__main__":
    E.run(score)
