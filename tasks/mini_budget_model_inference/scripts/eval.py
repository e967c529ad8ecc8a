"""Evaluator of the mlrb task `mini_budget_model_inference` (Mini budgeted inference).

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Scores the quantized gpt2-xs in <workspace>/model/ by its generation throughput
(tokens per second, batch size 1, greedy, 8 prompts x 128 new tokens x 3 runs). The
submission must keep gpt2-xs's architecture, be quantized with bitsandbytes, and
keep its WikiText-2 test perplexity within 1.05 times that of the unmodified
gpt2-xs (hidden/reference_model, measured in the same run).

Prints a {"details": ...} line with every measurement, then the final JSON
line ({"score": x}, or {"score": null, "error": ...} for an invalid
submission), and exits 0. The measurement code is shared by the tasks of the
ml-research-benchmark suite: mlrb_llm_eval, which mlrb mounts at /mlrb/lib
and puts on PYTHONPATH.
"""
import os

import mlrb_llm_eval as E

PPL = {"file": "wikitext2.txt", "context_length": 256, "stride": 128, "required": True}
MAX_PERPLEXITY_RATIO = 1.05
REQUIREMENTS = {
    "config_matches_reference": {"file": "reference_model/config.json",
                                 "keys": ["model_type", "n_layer", "n_embd", "n_head", "n_positions", "vocab_size"]},
    "weights": "quantized",
    "max_weight_bytes": 2 * E.GiB,
}
SPEED = {"new_tokens": 128, "warmup": 3, "runs": 3}


def speed_and_limits(r):
    """The score: tokens per second of the submission; the reference model's
    perplexity (same text, same windows) sets the perplexity limit."""
    details, hidden = r["details"], r["hidden"]
    details["speed"] = E.generation_benchmark(r["model"], r["tokenizer"], max_length=r["max_length"], **SPEED)
    ref_info = E.inspect_model_folder(os.path.join(hidden, "reference_model"), "reference_model/")
    ref_model, ref_tok, _ = E.load_language_model(ref_info, r["device"])
    with open(os.path.join(hidden, PPL["file"]), encoding="utf-8") as f:
        text = f.read()
    ctx = details["perplexity_context"]
    ref_ppl = E.perplexity(ref_model, ref_tok, text, context_length=ctx["context_length"], stride=ctx["stride"])
    ref_speed = E.generation_benchmark(ref_model, ref_tok, max_length=r["max_length"], **SPEED)
    details["reference"] = {"perplexity": ref_ppl, "speed": ref_speed}
    details["perplexity_limit"] = MAX_PERPLEXITY_RATIO * ref_ppl
    E.check_limits({"perplexity": details["perplexity"]}, {"perplexity": details["perplexity_limit"]})
    return details["speed"]["tokens_per_second"]


def score(workspace, hidden):
    return E.evaluate_language_model(workspace, hidden, kind="causal", requirements=REQUIREMENTS,
                                     perplexity_spec=PPL, score_fn=speed_and_limits)


if __name__ == "__main__":
    E.run(score)
