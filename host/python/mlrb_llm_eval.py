"""Measurement code for mlrb's GPU tasks (the `ml-research-benchmark` suite).

mlrb mounts this file read-only at /mlrb/lib and puts that folder on
PYTHONPATH when it runs a task's ``scripts/prepare.py`` or
``scripts/eval.py``, so a task script can ``import mlrb_llm_eval``.

This module is the public entry point; the code lives in modules mounted
beside it, each with one job, and every name below is re-exported here:

* mlrb_llm_protocol: the output protocol (log, finish, run, agent_code);
* mlrb_llm_env: offline libraries, determinism, the device and its peak
  memory;
* mlrb_llm_files: the trusted JSON and JSON-lines files of the hidden folder;
* mlrb_llm_inspect: the model folder and its safetensors headers, config and
  weight-format checks, and the limits on measured quantities;
* mlrb_llm_load: loading a checked Hugging Face folder or TorchScript module;
* mlrb_llm_score: log-likelihoods, generation, perplexity and throughput;
* mlrb_llm_text_metrics: ROUGE-L, BLEU and answer extraction;
* mlrb_llm_images: TorchScript image classifiers;
* mlrb_llm_evaluate: one benchmark component and the whole evaluation of a
  language model;
* mlrb_llm_datasets: the held-out benchmark data built from hub data sets;
* mlrb_llm_prepare: prepare scripts (manifest, reference models, image
  splits).

They import only the standard library, mlrb_eval and one another (in that
order, without cycles) at import time; torch, transformers, numpy, PIL and
datasets are imported inside the functions that need them, so the
pure-Python parts (answer extraction, text metrics, limit checks,
model-folder inspection, the JSON output) work without them.

The evaluator protocol (tasks/README.md): ``eval.py <workspace_dir>
<hidden_dir>`` prints as its last line of stdout one JSON object,
``{"score": <float>}`` for a valid submission or
``{"score": null, "error": "<one line>"}`` for an invalid one, and exits 0 in
both cases; a non-zero exit means the evaluator itself failed. Before that
line :func:`finish` prints one ``{"details": {...}}`` line with everything
that was measured (parameters, perplexity, throughput, per-benchmark scores),
which mlrb keeps in the evaluation log.

Everything in the workspace is hostile. A submitted model folder is read by
:func:`inspect_model_folder` before anything is loaded: symbolic links are
refused, pickled weights (``pytorch_model.bin``, ``*.pt``) are never loaded,
safetensors headers are parsed and bounded, custom code (``auto_map``) is
refused, and only a whitelist of files is exposed to transformers (through a
private folder of links), which loads them with ``trust_remote_code=False``,
``use_safetensors=True`` and ``local_files_only=True``. Exceptions raised
while the submitted model runs become :class:`Invalid` (an invalid
submission), not evaluator failures.

Evaluations are deterministic: fixed seeds, greedy decoding, fixed prompt
sets, batches formed by a fixed token budget in a fixed order. Only timings
(tokens per second, latency, inference time) vary between runs.

A task's evaluator is a configuration of :func:`evaluate_language_model`::

    import mlrb_llm_eval as E

    def score(workspace, hidden):
        return E.evaluate_language_model(
            workspace, hidden,
            kind="causal",
            requirements={"max_parameters": 30_500_000, "model_types": ["gpt2"]},
            components=[{"name": "mmlu", "type": "choice", "file": "mmlu.jsonl"}],
        )

    if __name__ == "__main__":
        E.run(score)

and its prepare script builds the held-out data with the ``build_*`` functions::

    E.prepare_main(lambda public, hidden: E.write_jsonl(
        os.path.join(hidden, "mmlu.jsonl"), E.build_mmlu(per_subject=30)))

Data formats written by prepare and read by the evaluator (JSON lines):

* ``choice``: ``{"id", "context", "choices": [continuations], "label"}``;
  each choice is scored by the log-likelihood of the continuation after the
  context (continuations carry their leading space, as in
  lm-evaluation-harness); accuracy.
* ``pairs``: ``{"id", "good", "bad"}``: correct when the whole good sentence
  is more likely than the bad one (BLiMP); accuracy.
* ``numeric``: ``{"id", "prompt", "answer"}``: greedy generation, the final
  number is extracted (:func:`extract_number`) and compared; accuracy.
* ``rouge_l``: ``{"id", "prompt", "reference"}``: greedy generation scored by
  ROUGE-L F1 against the reference; BLEU is reported alongside.
"""
from __future__ import annotations

# The standard-library modules the single-file version of this module
# imported stay reachable as its attributes.
import atexit  # noqa: F401
import contextlib  # noqa: F401
import hashlib  # noqa: F401
import json  # noqa: F401
import math  # noqa: F401
import os  # noqa: F401
import random  # noqa: F401
import re  # noqa: F401
import shutil  # noqa: F401
import stat  # noqa: F401
import struct  # noqa: F401
import sys  # noqa: F401
import tempfile  # noqa: F401
import time  # noqa: F401

import mlrb_eval  # noqa: F401
from mlrb_eval import Invalid, one_line
from mlrb_llm_datasets import (
    BLIMP_PARADIGMS, GLUE_SOURCES, MMLU_SOURCES, SUPERGLUE_SOURCES, build_arc, build_blimp,
    build_commonsense_qa, build_cosmosqa, build_glue, build_gsm8k, build_hellaswag, build_mathqa, build_mmlu,
    build_superglue, build_truthfulqa_mc1, build_wikitext2, build_xsum, hub_dataset, subsample)
from mlrb_llm_env import (
    offline_environment, peak_memory_bytes, pick_device, reset_peak_memory, set_determinism)
from mlrb_llm_evaluate import evaluate_component, evaluate_language_model
from mlrb_llm_files import read_json, read_jsonl, write_jsonl
from mlrb_llm_images import classify_images, evaluate_image_classifier, read_image_spec
from mlrb_llm_inspect import (
    DEFAULT_MAX_WEIGHT_BYTES, FLOAT_DTYPES, MAX_CONFIG_BYTES, MAX_FOLDER_ENTRIES,
    MAX_SAFETENSORS_HEADER_BYTES, MAX_TENSORS, MAX_TOKENIZER_FILE_BYTES, MODEL_FILES, PICKLE_SUFFIXES,
    SAFETENSORS_DTYPES, TOKENIZER_FILES, GiB, MiB, check_config, check_limits, check_weight_format,
    inspect_model_folder, read_safetensors_header, read_workspace_json, require_quantization)
from mlrb_llm_load import (
    TORCHSCRIPT_FORBIDDEN_OPS, TORCHSCRIPT_NAMESPACES, count_parameters, load_language_model,
    load_torchscript, model_max_length)
from mlrb_llm_prepare import prepare_main, save_hub_config, save_reference_model, write_image_split
from mlrb_llm_protocol import agent_code, finish, log, run
from mlrb_llm_score import (
    PROBE_PROMPTS, PROBE_TEXT, SMOKE, generate_texts, generation_benchmark, long_prompt, loglikelihoods,
    multiple_choice, pair_accuracy, perplexity)
from mlrb_llm_text_metrics import (
    corpus_bleu, exact_match, extract_choice, extract_number, normalize_answer, numbers_match, rouge_l,
    tokenize_words)


__all__ = [
    # output and errors
    "Invalid", "one_line", "log", "finish", "run", "agent_code",
    # environment
    "offline_environment", "set_determinism", "pick_device",
    # files and model folders
    "read_json", "read_jsonl", "write_jsonl", "read_workspace_json",
    "read_safetensors_header", "inspect_model_folder", "check_weight_format",
    "require_quantization", "check_config", "check_limits",
    "load_language_model", "load_torchscript", "count_parameters", "model_max_length",
    # measurements
    "loglikelihoods", "multiple_choice", "pair_accuracy", "generate_texts",
    "perplexity", "generation_benchmark", "long_prompt", "reset_peak_memory",
    "peak_memory_bytes", "read_image_spec", "classify_images",
    # text metrics and answer extraction
    "tokenize_words", "rouge_l", "corpus_bleu", "extract_number", "numbers_match",
    "extract_choice", "normalize_answer", "exact_match",
    # whole evaluations
    "evaluate_language_model", "evaluate_component", "evaluate_image_classifier",
    # prepare scripts
    "prepare_main", "hub_dataset", "subsample", "build_mmlu", "build_hellaswag",
    "build_arc", "build_blimp", "build_gsm8k", "build_superglue", "build_glue",
    "build_mathqa", "build_commonsense_qa", "build_truthfulqa_mc1", "build_cosmosqa",
    "build_xsum", "build_wikitext2", "save_reference_model", "save_hub_config",
    "write_image_split",
    # sizes, limits and fixed data
    "GiB", "MiB", "MAX_CONFIG_BYTES", "MAX_TOKENIZER_FILE_BYTES", "MAX_SAFETENSORS_HEADER_BYTES",
    "MAX_FOLDER_ENTRIES", "MAX_TENSORS", "DEFAULT_MAX_WEIGHT_BYTES", "MODEL_FILES", "TOKENIZER_FILES",
    "PICKLE_SUFFIXES", "SAFETENSORS_DTYPES", "FLOAT_DTYPES", "TORCHSCRIPT_FORBIDDEN_OPS",
    "TORCHSCRIPT_NAMESPACES", "PROBE_TEXT", "PROBE_PROMPTS", "SMOKE", "MMLU_SOURCES", "BLIMP_PARADIGMS",
    "SUPERGLUE_SOURCES", "GLUE_SOURCES",
]
