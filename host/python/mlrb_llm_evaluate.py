"""Whole evaluations of language models: one benchmark component, and
:func:`evaluate_language_model`, the configurable evaluator of the GPU tasks
(checks, loading, probes, perplexity, components, score)."""
from __future__ import annotations

import os
import time

from mlrb_eval import Invalid, one_line
from mlrb_llm_env import offline_environment, pick_device, set_determinism
from mlrb_llm_files import read_json, read_jsonl
from mlrb_llm_inspect import (
    DEFAULT_MAX_WEIGHT_BYTES, GiB, check_config, check_limits, check_weight_format, inspect_model_folder,
    require_quantization)
from mlrb_llm_load import count_parameters, load_language_model, model_max_length
from mlrb_llm_protocol import log
from mlrb_llm_score import (
    generate_texts, generation_benchmark, long_prompt, multiple_choice, pair_accuracy, perplexity)
from mlrb_llm_text_metrics import corpus_bleu, extract_number, numbers_match, rouge_l


def evaluate_component(model, tokenizer, kind, component, hidden, max_length, batch_tokens=4096):
    """Scores one benchmark component (see :mod:`mlrb_llm_eval` for the data
    formats). ``component``: ``name``, ``type`` ("choice", "pairs",
    "numeric", "rouge_l"), ``file`` (JSON lines in the hidden folder), and
    per type ``normalize`` ("chars"), ``max_new_tokens``, ``stop``,
    ``batch_size``. Returns ``(score, extra_details)``."""
    items = read_jsonl(os.path.join(hidden, component["file"]))
    what = f"scoring {component['name']}"
    ctype = component["type"]
    if ctype == "choice":
        acc, _ = multiple_choice(model, tokenizer, items, kind=kind, max_length=max_length,
                                 normalize=component.get("normalize"), batch_tokens=batch_tokens, what=what)
        return acc, {"items": len(items)}
    if ctype == "pairs":
        if kind != "causal":
            raise Invalid(f"{component['name']} needs a causal language model")
        return pair_accuracy(model, tokenizer, items, max_length=max_length, batch_tokens=batch_tokens,
                             what=what), {"items": len(items)}
    if ctype in ("numeric", "rouge_l"):
        outputs = generate_texts(model, tokenizer, [it["prompt"] for it in items], kind=kind,
                                 max_new_tokens=component.get("max_new_tokens", 128), max_length=max_length,
                                 stop=component.get("stop"), batch_size=component.get("batch_size", 8),
                                 what=what)
        examples = [{"id": it["id"], "output": one_line(o, 300)} for it, o in list(zip(items, outputs))[:3]]
        if ctype == "numeric":
            correct = sum(numbers_match(extract_number(o), it["answer"]) for it, o in zip(items, outputs))
            return correct / max(1, len(items)), {"items": len(items), "examples": examples}
        scores = [rouge_l(o, it["reference"]) for it, o in zip(items, outputs)]
        bleu = corpus_bleu(outputs, [it["reference"] for it in items])
        return sum(scores) / max(1, len(scores)), {"items": len(items), "bleu": bleu, "examples": examples}
    raise ValueError(f"unknown component type {ctype!r}")


def evaluate_language_model(workspace, hidden, *, model_dir="model", kind="causal", requirements=None,
                            components=(), weights=None, score_fn=None, perplexity_spec=None,
                            probe=None, max_length_cap=2048, batch_tokens=4096, seed=0):
    """The whole evaluation of a Hugging Face model folder in the workspace.

    1. :func:`inspect_model_folder` and the pre-load checks of
       ``requirements``: ``max_weight_bytes``, ``model_types``,
       ``config_equals`` ({key: value}), ``config_matches_reference``
       (``{"file": <hidden config.json>, "keys": [...]}``), ``weights``
       ("unquantized-fp16-fp32", "unquantized", "quantized" or None).
    2. Loads the model (``kind``: "causal", "seq2seq", "any") on the GPU and
       counts its parameters; ``max_parameters``.
    3. ``probe`` (``{"prompt_tokens", "new_tokens", "warmup", "runs"}``): one
       long prompt generated at batch size 1; its peak GPU memory is checked
       against ``max_peak_gpu_memory_gib`` and its throughput and latency are
       reported. By default a short throughput probe over PROBE_PROMPTS runs
       for information.
    4. ``perplexity_spec`` (``{"file", "context_length", "stride",
       "max_tokens"}``): perplexity on a hidden text (causal models only).
    5. ``components`` (:func:`evaluate_component`); the score is their mean
       (weighted by ``weights``, {name: weight}) unless ``score_fn(results)``
       computes it (it may raise :class:`Invalid`).

    Returns ``(score, details)``; an :class:`Invalid` raised on the way
    carries the details measured so far as its ``details``."""
    started = time.time()
    requirements = dict(requirements or {})
    name = model_dir.rstrip("/") + "/"
    info = inspect_model_folder(os.path.join(workspace, model_dir), name,
                                max_weight_bytes=requirements.get("max_weight_bytes", DEFAULT_MAX_WEIGHT_BYTES))
    details = {
        "model_type": info["config"].get("model_type"),
        "weight_bytes": info["weight_bytes"],
        "stored_dtypes": info["dtype_elements"],
        "ignored_files": info["ignored"][:20],
    }
    try:
        _check_requirements(info, requirements, hidden)
        loaded = _load_measured(info, kind, seed, requirements.get("max_parameters"), max_length_cap, details)
        model, tokenizer, actual_kind, max_length = (
            loaded["model"], loaded["tokenizer"], loaded["kind"], loaded["max_length"])
        _run_probe(loaded, probe, requirements.get("max_peak_gpu_memory_gib"), details)
        if perplexity_spec is not None and actual_kind == "causal":
            _hidden_perplexity(model, tokenizer, hidden, perplexity_spec, max_length, details)
        results = {}
        for comp in components:
            log(f"{comp['name']} ...")
            value, extra = evaluate_component(model, tokenizer, actual_kind, comp, hidden, max_length, batch_tokens)
            results[comp["name"]] = value
            details[comp["name"]] = dict(extra, score=value)
            log(f"{comp['name']}: {value:.4f}")
        details["components"] = results
        if score_fn is not None:
            score = score_fn({"model": model, "tokenizer": tokenizer, "kind": actual_kind, "device": loaded["device"],
                              "details": details, "components": results, "hidden": hidden,
                              "max_length": max_length, "info": info})
        else:
            score = _weighted_mean(results, weights)
    except Invalid as e:
        details["evaluation_seconds"] = time.time() - started
        e.details = details
        raise
    details["evaluation_seconds"] = time.time() - started
    return score, details


def _check_requirements(info, requirements, hidden):
    """The checks of ``requirements`` (see :func:`evaluate_language_model`)
    that need no loading: config.json, the weight format, and the stored
    tensor elements against ``max_parameters``."""
    name = info["name"]
    check_config(info, requirements.get("model_types"), requirements.get("config_equals"))
    ref = requirements.get("config_matches_reference")
    if ref:
        reference = read_json(os.path.join(hidden, ref["file"]))
        check_config(info, equals={k: reference.get(k) for k in ref["keys"]})
    fmt = requirements.get("weights")
    if fmt == "unquantized-fp16-fp32":
        check_weight_format(info, ("F16", "F32"), allow_quantization=False)
    elif fmt == "unquantized":
        check_weight_format(info, None, allow_quantization=False)
    elif fmt == "quantized":
        require_quantization(info, requirements.get("quantization_methods", ("bitsandbytes",)))
    elif fmt is not None:
        raise ValueError(f"unknown weights requirement {fmt!r}")
    max_params = requirements.get("max_parameters")
    if max_params is not None and info["stored_elements"] > 4 * max_params + 10_000_000:
        raise Invalid(f"{name} stores {info['stored_elements']:,} tensor elements, far above the "
                      f"limit of {max_params:,} parameters")


def _load_measured(info, kind, seed, max_params, max_length_cap, details):
    """Loads the checked model on the evaluation device (seeded, offline),
    counts its parameters against ``max_params`` and records versions,
    device, architecture, parameters and max_length in ``details``. Returns
    ``{"model", "tokenizer", "kind", "device", "max_length"}``."""
    offline_environment()
    set_determinism(seed)
    device = pick_device()
    import torch
    import transformers
    details["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    if device.type == "cuda":
        details["device"] = torch.cuda.get_device_name(device)
    log(f"loading {info['name']} ...")
    model, tokenizer, actual_kind = load_language_model(info, device, kind=kind)
    details["architecture"] = actual_kind
    counts = count_parameters(model)
    details["parameters"] = counts
    check_limits({"parameters": counts["total"]}, {"parameters": max_params})
    max_length = model_max_length(model, max_length_cap)
    details["max_length"] = max_length
    return {"model": model, "tokenizer": tokenizer, "kind": actual_kind, "device": device,
            "max_length": max_length}


def _run_probe(loaded, probe, max_peak_gib, details):
    """With a ``probe``: the memory probe (one long prompt), its peak GPU
    memory checked against ``max_peak_gib`` (edge tasks). Without one: a short
    throughput probe, for information only."""
    model, tokenizer, kind, max_length = loaded["model"], loaded["tokenizer"], loaded["kind"], loaded["max_length"]
    if probe is None:
        log("throughput probe ...")
        try:
            stats = generation_benchmark(model, tokenizer, kind=kind, new_tokens=64, warmup=1, runs=1,
                                         max_length=max_length)
            details["throughput"] = stats
        except Invalid as e:  # information only
            details["throughput"] = {"error": str(e)}
        return
    log("memory and throughput probe ...")
    n_prompt = min(probe.get("prompt_tokens", 512), max_length - probe.get("new_tokens", 128))
    ids = [long_prompt(tokenizer, max(1, n_prompt))]
    stats = generation_benchmark(model, tokenizer, kind=kind, new_tokens=probe.get("new_tokens", 128),
                                 warmup=probe.get("warmup", 1), runs=probe.get("runs", 3),
                                 max_length=max_length, prompt_token_ids=ids, what="the memory probe")
    peak = stats["peak_gpu_memory_bytes"]
    details["probe"] = dict(stats, peak_gpu_memory_gib=None if peak is None else peak / GiB)
    if max_peak_gib is not None:
        if peak is None:
            log("no GPU: the memory limit is not checked")
        else:
            check_limits({"peak_gpu_memory_gib": peak / GiB}, {"peak_gpu_memory_gib": max_peak_gib})


def _hidden_perplexity(model, tokenizer, hidden, spec, max_length, details):
    """Perplexity on the hidden text ``spec["file"]``, recorded in
    ``details``; an invalid result is recorded as an error unless
    ``spec["required"]``."""
    log("perplexity ...")
    with open(os.path.join(hidden, spec["file"]), encoding="utf-8") as f:
        text = f.read()
    ctx = min(spec.get("context_length", 1024), max_length)
    stride = min(spec.get("stride") or ctx // 2, max(1, ctx // 2))
    try:
        details["perplexity"] = perplexity(model, tokenizer, text, context_length=ctx, stride=stride,
                                           max_tokens=spec.get("max_tokens"))
        details["perplexity_context"] = {"context_length": ctx, "stride": stride}
    except Invalid as e:
        if spec.get("required"):
            raise
        details["perplexity"] = {"error": str(e)}


def _weighted_mean(results, weights):
    """The mean of the component scores, weighted by ``weights`` ({name:
    weight}, 1 by default)."""
    w = weights or {}
    total = sum(w.get(k, 1.0) for k in results)
    return sum(w.get(k, 1.0) * v for k, v in results.items()) / total
