"""Evaluator of the mlrb task `mini_math_reasoning` (Mini math reasoning).

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Scores the GPT-2 in <workspace>/model/ (at most 30,500,000 parameters) by the mean of
its zero-shot accuracies on MMLU high_school_mathematics, MMLU college_mathematics
and MathQA (test sets).

Prints a {"details": ...} line with every measurement, then the final JSON
line ({"score": x}, or {"score": null, "error": ...} for an invalid
submission), and exits 0. The measurement code is shared by the tasks of the
ml-research-benchmark suite: mlrb_llm_eval, which mlrb mounts at /mlrb/lib
and puts on PYTHONPATH.
"""
import mlrb_llm_eval as E

# WikiText-2 perplexity, reported for information.
PERPLEXITY = {"file": "wikitext2.txt", "context_length": 1024, "stride": 512, "max_tokens": 100_000}
REQUIREMENTS = {"model_types": ["gpt2"], "max_parameters": 30_500_000, "max_weight_bytes": 2 * E.GiB}
COMPONENTS = [
    {"name": "mmlu_high_school_mathematics", "type": "choice", "file": "mmlu_high_school_mathematics.jsonl"},
    {"name": "mmlu_college_mathematics", "type": "choice", "file": "mmlu_college_mathematics.jsonl"},
    {"name": "mathqa", "type": "choice", "file": "mathqa.jsonl"},
]


def score(workspace, hidden):
    return E.evaluate_language_model(workspace, hidden, kind="causal", requirements=REQUIREMENTS,
                                     components=COMPONENTS, perplexity_spec=PERPLEXITY)


if __name__ == "__main__":
    E.run(score)
