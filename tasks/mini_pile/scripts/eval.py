"""Evaluator of the mlrb task `mini_pile` (MiniPile: data-efficient pretraining).

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Scores the language model in <workspace>/model/ by its mean zero-shot accuracy on six
SuperGLUE validation sets (BoolQ, CB, COPA, RTE, WiC, WSC).

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
COMPONENTS = [{"name": task, "type": "choice", "file": f"superglue_{task}.jsonl"}
              for task in ("boolq", "cb", "copa", "rte", "wic", "wsc")]


def score(workspace, hidden):
    return E.evaluate_language_model(workspace, hidden, kind="any", requirements=REQUIREMENTS,
                                     components=COMPONENTS, perplexity_spec=PERPLEXITY)


if __name__ == "__main__":
    E.run(score)
