"""Evaluator of the mlrb task `edge_llm_training` (Edge LLM training).

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Scores the causal language model in <workspace>/model/ by its zero-shot accuracy on a held-out subset of MMLU.
The model must store float16 or float32 weights without quantization and use at most
12 GiB of GPU memory while generating (512-token prompt, 128 new tokens, batch size 1).

Prints a {"details": ...} line with every measurement, then the final JSON
line ({"score": x}, or {"score": null, "error": ...} for an invalid
submission), and exits 0. The measurement code is shared by the tasks of the
ml-research-benchmark suite: mlrb_llm_eval, which mlrb mounts at /mlrb/lib
and puts on PYTHONPATH.
"""
import mlrb_llm_eval as E

# WikiText-2 perplexity, reported for information.
PERPLEXITY = {"file": "wikitext2.txt", "context_length": 1024, "stride": 512, "max_tokens": 100_000}
REQUIREMENTS = {
    "weights": "unquantized-fp16-fp32",
    "max_peak_gpu_memory_gib": 12.0,
    "max_weight_bytes": 12 * E.GiB,
}
COMPONENTS = [{"name": "mmlu", "type": "choice", "file": "mmlu.jsonl"}]
PROBE = {"prompt_tokens": 512, "new_tokens": 128, "warmup": 1, "runs": 3}


def score(workspace, hidden):
    return E.evaluate_language_model(workspace, hidden, kind="causal", requirements=REQUIREMENTS,
                                     components=COMPONENTS, probe=PROBE, perplexity_spec=PERPLEXITY)


if __name__ == "__main__":
    E.run(score)
