"""Evaluator of the mlrb task `mini_edge_llm_compression` (Mini edge LLM compression).

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Scores the compressed gpt2-xs in <workspace>/model/ by the mean of its zero-shot
accuracies on held-out MMLU, CommonsenseQA and TruthfulQA MC1 questions. The model
must remain a GPT-2 with float16 or float32 weights, no quantization, at most 90% of
gpt2-xs's 30,044,544 parameters and at most 12 GiB of GPU memory while
generating.

Prints a {"details": ...} line with every measurement, then the final JSON
line ({"score": x}, or {"score": null, "error": ...} for an invalid
submission), and exits 0. The measurement code is shared by the tasks of the
ml-research-benchmark suite: mlrb_llm_eval, which mlrb mounts at /mlrb/lib
and puts on PYTHONPATH.
"""
import mlrb_llm_eval as E

# WikiText-2 perplexity, reported for information.
PERPLEXITY = {"file": "wikitext2.txt", "context_length": 1024, "stride": 512, "max_tokens": 100_000}
GPT2_XS_PARAMETERS = 30_044_544
REQUIREMENTS = {
    "model_types": ["gpt2"],
    "weights": "unquantized-fp16-fp32",
    "max_parameters": int(0.9 * GPT2_XS_PARAMETERS),
    "max_peak_gpu_memory_gib": 12.0,
    "max_weight_bytes": 2 * E.GiB,
}
COMPONENTS = [
    {"name": "mmlu", "type": "choice", "file": "mmlu.jsonl"},
    {"name": "commonsense_qa", "type": "choice", "file": "commonsense_qa.jsonl"},
    {"name": "truthfulqa_mc1", "type": "choice", "file": "truthfulqa_mc1.jsonl"},
]
PROBE = {"prompt_tokens": 128, "new_tokens": 128, "warmup": 1, "runs": 3}


def score(workspace, hidden):
    return E.evaluate_language_model(workspace, hidden, kind="causal", requirements=REQUIREMENTS,
                                     components=COMPONENTS, probe=PROBE, perplexity_spec=PERPLEXITY)


if __name__ == "__main__":
    E.run(score)
