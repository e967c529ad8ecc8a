"""Evaluator of the mlrb task `math_reasoning` (Automated math reasoning: autoformalization).

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Scores the model in <workspace>/model/ by the mean ROUGE-L F1 of its greedy Lean 3
formalizations (at most 512 new tokens) of 200 held-out problems against the
reference formal_proof; corpus BLEU is reported alongside.

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
COMPONENTS = [{"name": "autoformalization", "type": "rouge_l", "file": "autoformalization.jsonl",
               "max_new_tokens": 512, "stop": ["\n\n\n", "Statement in natural language:"],
               "batch_size": 8}]


def score(workspace, hidden):
    return E.evaluate_language_model(workspace, hidden, kind="any", requirements=REQUIREMENTS,
                                     components=COMPONENTS, perplexity_spec=PERPLEXITY,
                                     max_length_cap=4096)


if __name__ == "__main__":
    E.run(score)
