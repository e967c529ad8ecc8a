"""Measurement code for mlrb's GPU tasks (the `ml-research-benchmark` suite).

mlrb mounts this file read-only at /mlrb/lib and puts that folder on
PYTHONPATH when it runs a task's ``scripts/prepare.py`` or
``scripts/eval.py``, so a task script can ``import mlrb_llm_eval``.

The module imports only the standard library and mlrb_eval (mounted beside
it) at import time; torch, transformers, numpy, PIL and datasets are imported
inside the functions that need them, so the pure-Python parts (answer
extraction, text metrics, limit checks, model-folder inspection, the JSON
output) work without them.

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

import atexit
import contextlib
import hashlib
import json
import math
import os
import random
import re
import shutil
import stat
import struct
import sys
import tempfile
import time

# mlrb mounts mlrb_eval beside this module: one exception class and one
# protocol line for every evaluator.
import mlrb_eval
from mlrb_eval import Invalid, one_line


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
]

GiB = 1024 ** 3
MiB = 1024 ** 2

# Caps on what is read from a workspace before any parsing.
MAX_CONFIG_BYTES = 1 * MiB
MAX_TOKENIZER_FILE_BYTES = 256 * MiB
MAX_SAFETENSORS_HEADER_BYTES = 100 * MiB
MAX_FOLDER_ENTRIES = 5000
MAX_TENSORS = 200_000
DEFAULT_MAX_WEIGHT_BYTES = 64 * GiB

# Files of a Hugging Face model folder that are given to transformers; all
# others (pickles, optimizer states, checkpoints, generation_config.json,
# custom code) are never seen by it.
MODEL_FILES = ("config.json", "model.safetensors.index.json")
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt",
    "tokenizer.model", "spiece.model", "sentencepiece.bpe.model",
    "chat_template.jinja", "chat_template.json",
)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz")

# safetensors dtypes: bytes per element (sub-byte types are rounded up per tensor).
SAFETENSORS_DTYPES = {
    "BOOL": 1, "U8": 1, "I8": 1, "U16": 2, "I16": 2, "U32": 4, "I32": 4,
    "U64": 8, "I64": 8, "F16": 2, "BF16": 2, "F32": 4, "F64": 8,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "E8M0": 1, "F4": 0.5, "F6_E2M3": 0.75,
    "F6_E3M2": 0.75, "C64": 8,
}
FLOAT_DTYPES = {"F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "E8M0", "F4",
                "F6_E2M3", "F6_E3M2"}

# A fixed English text (written for mlrb) used to build prompts of a given
# length for throughput and memory probes.
PROBE_TEXT = (
    "The old lighthouse stood at the end of a narrow spit of land, where the river met the sea. "
    "Every evening the keeper climbed the spiral stairs, trimmed the wick and polished the great lens "
    "until it caught the last of the daylight. Ships coming home from the north would look for its "
    "beam long before they could see the harbour, and fishermen said that on clear nights it could be "
    "seen from the islands forty miles away. In the town below, the market closed at dusk, the bakers "
    "set their dough to rise for the morning, and children were called in from the quay. "
    "Scientists who study coastal weather keep careful records of wind, tide and temperature. "
    "A single year of hourly measurements fills thousands of rows, and patterns appear only when "
    "the numbers are averaged over many seasons: the spring tides that flood the marsh, the autumn "
    "gales that strip the beach of sand, the long calm weeks of late summer. "
)
PROBE_PROMPTS = (
    "Hello, my name is Sam. I am writing to you because I did not get an answer to my last letter.",
    "The three most important things to remember when cooking rice are",
    "Once upon a time, in a village at the edge of a great forest, there lived",
    "The history of the printing press begins in the fifteenth century, when",
    "To measure the speed of sound in air, a student can",
    "The best way to learn a new language as an adult is",
    "Photosynthesis is the process by which plants",
    "In the year 2050, most people will travel to work by",
)


# ---------------------------------------------------------------------------
# Output and errors


def log(*parts):
    """Progress messages go to stderr, so that stdout ends with the JSON line."""
    print(*parts, file=sys.stderr, flush=True)


def _jsonable(value):
    """JSON-friendly form of numbers from numpy or torch, and of sets."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    for cast in (int, float):
        try:
            if hasattr(value, "item"):
                return _jsonable(value.item())
            return _jsonable(cast(value))
        except (TypeError, ValueError):
            continue
    return str(value)


def finish(score=None, error=None, details=None):
    """Prints ``{"details": ...}`` (when given), then the final JSON line, and
    exits 0. ``finish(score=x)``: a valid submission, x rounded to 6 decimals;
    ``finish(error=e)``: an invalid one. A score that is not a finite number
    is an evaluator bug: it raises ValueError (non-zero exit)."""
    if details:
        print(json.dumps({"details": _jsonable(details)}, sort_keys=True))
    mlrb_eval.finish(score=score, error=error)


def run(score_fn, argv=None):
    """Runs an evaluator: ``score_fn(workspace_dir, hidden_dir)`` returns the
    score, or ``(score, details)``, or raises :class:`Invalid`; either way the
    JSON line is printed and the process exits 0. Any other exception
    propagates (an evaluator failure, non-zero exit)."""
    argv = sys.argv if argv is None else argv
    if len(argv) != 3:
        sys.exit("usage: eval.py <workspace_dir> <hidden_dir>")
    details = {}
    try:
        result = score_fn(argv[1], argv[2])
    except Invalid as e:
        details = getattr(e, "details", None) or {}
        finish(error=e, details=details)
    if isinstance(result, tuple):
        score, details = result
    else:
        score = result
    finish(score=score, details=details)


@contextlib.contextmanager
def agent_code(what):
    """Turns any exception raised while the submitted model runs into
    :class:`Invalid` (``what`` says which step), so a broken model is an
    invalid submission rather than an evaluator failure."""
    try:
        yield
    except Invalid:
        raise
    except MemoryError:
        raise Invalid(f"{what}: out of memory")
    except Exception as e:  # noqa: BLE001 - everything the model can raise
        name = type(e).__name__
        text = str(e)
        if "OutOfMemory" in name or "out of memory" in text.lower():
            raise Invalid(f"{what}: the model ran out of GPU memory")
        raise Invalid(f"{what} failed: {name}: {one_line(text, 300)}")


# ---------------------------------------------------------------------------
# Environment


def offline_environment():
    """Makes the Hugging Face libraries work offline and quietly, and cuBLAS
    deterministic; call before importing torch/transformers in an evaluator."""
    for key, value in (
        ("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"),
        ("HF_HUB_DISABLE_TELEMETRY", "1"), ("TOKENIZERS_PARALLELISM", "false"),
        ("TRANSFORMERS_VERBOSITY", "error"), ("CUBLAS_WORKSPACE_CONFIG", ":4096:8"),
        ("PYTHONHASHSEED", "0"),
    ):
        os.environ.setdefault(key, value)
    if not os.access(os.environ.get("HF_HOME", os.path.expanduser("~")), os.W_OK):
        os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="mlrb-hf-")


def set_determinism(seed=0):
    """Seeds Python, numpy and torch, and asks torch for deterministic kernels."""
    random.seed(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except ImportError:
        pass
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
    except Exception:  # noqa: BLE001 - older torch
        pass


def pick_device():
    """The first GPU. Without one the evaluator fails (exit status 1), unless
    MLRB_EVAL_ALLOW_CPU=1 is set (to test an evaluator on a CPU)."""
    import torch
    if torch.cuda.is_available():
        return torch.device("cuda:0")
    if os.environ.get("MLRB_EVAL_ALLOW_CPU") == "1":
        return torch.device("cpu")
    raise RuntimeError("no GPU is visible to the evaluator (MLRB_EVAL_ALLOW_CPU=1 allows a CPU for testing)")


# ---------------------------------------------------------------------------
# Files


def read_json(path):
    """A trusted JSON file (hidden data written by prepare)."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_jsonl(path, limit=None):
    """A trusted JSON-lines file (hidden data written by prepare)."""
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                records.append(json.loads(line))
                if limit is not None and len(records) >= limit:
                    break
    return records


def write_jsonl(path, records):
    """Writes records as JSON lines, byte-for-byte reproducibly."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")


def _lstat_regular(path, name):
    return mlrb_eval.checked_lstat(path, name)


def read_workspace_json(path, name, max_bytes=MAX_CONFIG_BYTES):
    """A JSON object from the (hostile) workspace: size-capped, regular file only."""
    raw = mlrb_eval.read_file(path, name, max_bytes)
    try:
        value = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Invalid(f"{name} is not valid JSON: {one_line(e, 120)}")
    if not isinstance(value, dict):
        raise Invalid(f"{name} must hold a JSON object")
    return value


def read_safetensors_header(path, name=None):
    """The tensors of a safetensors file, read from its header without loading
    any data: ``{tensor_name: (dtype, shape, n_elements)}``. Raises
    :class:`Invalid` for anything that is not a well-formed safetensors file."""
    name = name or os.path.basename(path)
    st = _lstat_regular(path, name)
    size = st.st_size
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise Invalid(f"{name} cannot be read: {e.strerror}")
    with os.fdopen(fd, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise Invalid(f"{name} is not a safetensors file (too short)")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_SAFETENSORS_HEADER_BYTES or n > size - 8:
            raise Invalid(f"{name} is not a safetensors file (bad header length)")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise Invalid(f"{name} is not a safetensors file (header is not JSON)")
    if not isinstance(header, dict):
        raise Invalid(f"{name} is not a safetensors file (header is not an object)")
    if len(header) > MAX_TENSORS:
        raise Invalid(f"{name} holds more than {MAX_TENSORS} tensors")
    data_len = size - 8 - n
    tensors = {}
    for key, meta in header.items():
        if key == "__metadata__":
            continue
        if not isinstance(meta, dict):
            raise Invalid(f"{name}: tensor {key[:80]!r} has a malformed entry")
        dtype, shape, offsets = meta.get("dtype"), meta.get("shape"), meta.get("data_offsets")
        if dtype not in SAFETENSORS_DTYPES:
            raise Invalid(f"{name}: tensor {key[:80]!r} has an unsupported dtype {str(dtype)[:20]!r}")
        if (not isinstance(shape, list) or len(shape) > 16
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            raise Invalid(f"{name}: tensor {key[:80]!r} has a malformed shape")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= data_len):
            raise Invalid(f"{name}: tensor {key[:80]!r} has data outside the file")
        numel = math.prod(shape)
        expected = math.ceil(numel * SAFETENSORS_DTYPES[dtype])
        if offsets[1] - offsets[0] != expected:
            raise Invalid(f"{name}: tensor {key[:80]!r} has a size that does not match its shape")
        tensors[key] = (dtype, tuple(shape), numel)
    return tensors


def inspect_model_folder(path, name="model/", max_weight_bytes=DEFAULT_MAX_WEIGHT_BYTES,
                         require_tokenizer=True):
    """Checks a Hugging Face model folder without loading it. Returns a dict:
    ``config`` (config.json), ``weights`` (the safetensors files transformers
    will read), ``weight_bytes``, ``stored_elements`` (elements of all stored
    tensors), ``dtype_elements`` ({dtype: elements}), ``quantization``
    (config's quantization_config or None), ``tokenizer_files``, ``ignored``
    (files that are not given to transformers) and ``path``.

    Raises :class:`Invalid` when the folder is missing, is or holds symbolic
    links, has no config.json, has only pickled weights, needs custom code,
    has no tokenizer (when required), or its weights exceed
    ``max_weight_bytes``."""
    mlrb_eval.checked_lstat(
        path, name, folder=True, missing=": save the model there (a Hugging Face model folder)"
    )
    files = {}
    ignored = []
    with os.scandir(path) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_FOLDER_ENTRIES:
                raise Invalid(f"{name} holds more than {MAX_FOLDER_ENTRIES} entries")
            est = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(est.st_mode):
                if entry.name in MODEL_FILES + TOKENIZER_FILES or entry.name.endswith(".safetensors"):
                    raise Invalid(f"{name}{entry.name} is a symbolic link; write regular files")
                ignored.append(entry.name)
            elif stat.S_ISREG(est.st_mode):
                files[entry.name] = est.st_size
            else:
                ignored.append(entry.name + "/" if stat.S_ISDIR(est.st_mode) else entry.name)
    if "config.json" not in files:
        if "adapter_config.json" in files:
            raise Invalid(f"{name} holds an adapter only; merge it into the base model and save the full model")
        raise Invalid(f"{name}config.json missing: save the model with save_pretrained()")
    config = read_workspace_json(os.path.join(path, "config.json"), f"{name}config.json")
    if "auto_map" in config:
        raise Invalid(f"{name}config.json needs custom code (auto_map); use an architecture built into transformers")
    if not isinstance(config.get("model_type"), str) or not config["model_type"]:
        raise Invalid(f"{name}config.json has no model_type")

    # The weights transformers will read.
    if "model.safetensors.index.json" in files:
        index = read_workspace_json(os.path.join(path, "model.safetensors.index.json"),
                                    f"{name}model.safetensors.index.json", 64 * MiB)
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise Invalid(f"{name}model.safetensors.index.json has no weight_map")
        weights = sorted({v for v in weight_map.values() if isinstance(v, str)})
        for w in weights:
            if "/" in w or "\\" in w or not w.endswith(".safetensors") or w not in files:
                raise Invalid(f"{name}model.safetensors.index.json names a missing or invalid file {w[:80]!r}")
    elif "model.safetensors" in files:
        weights = ["model.safetensors"]
    else:
        pickles = sorted(f for f in files if f.endswith(PICKLE_SUFFIXES))
        if pickles:
            raise Invalid(f"{name} holds pickled weights ({pickles[0]}) but no model.safetensors; "
                          "pickles are never loaded: save with save_pretrained() (safetensors, the default since transformers 4.35)")
        raise Invalid(f"{name}model.safetensors missing: save the weights in safetensors format")
    weight_bytes = sum(files[w] for w in weights)
    if weight_bytes > max_weight_bytes:
        raise Invalid(f"{name} weights take {weight_bytes / GiB:.2f} GiB, more than the {max_weight_bytes / GiB:g} GiB allowed")
    dtype_elements = {}
    stored = 0
    for w in weights:
        for dtype, _shape, numel in read_safetensors_header(os.path.join(path, w), f"{name}{w}").values():
            dtype_elements[dtype] = dtype_elements.get(dtype, 0) + numel
            stored += numel

    tokenizer_files = sorted(f for f in files if f in TOKENIZER_FILES)
    for f in tokenizer_files:
        if files[f] > MAX_TOKENIZER_FILE_BYTES:
            raise Invalid(f"{name}{f} is larger than {MAX_TOKENIZER_FILE_BYTES // MiB} MiB")
    if "tokenizer_config.json" in tokenizer_files:
        tok_config = read_workspace_json(os.path.join(path, "tokenizer_config.json"),
                                         f"{name}tokenizer_config.json", 64 * MiB)
        if "auto_map" in tok_config:
            raise Invalid(f"{name}tokenizer_config.json needs custom code (auto_map)")
    if require_tokenizer and not ({"tokenizer.json", "vocab.json", "vocab.txt", "tokenizer.model",
                                   "spiece.model", "sentencepiece.bpe.model"} & set(tokenizer_files)):
        raise Invalid(f"{name} has no tokenizer: save it next to the model (tokenizer.save_pretrained)")
    given = set(weights) | set(tokenizer_files) | {f for f in MODEL_FILES if f in files}
    ignored += sorted(f for f in files if f not in given)
    quantization = config.get("quantization_config")
    return {
        "path": path, "name": name, "config": config, "weights": weights,
        "weight_bytes": weight_bytes, "stored_elements": stored,
        "dtype_elements": dtype_elements, "quantization": quantization if quantization else None,
        "tokenizer_files": tokenizer_files, "ignored": sorted(ignored),
    }


def check_weight_format(info, allowed_float_dtypes=("F16", "F32"), allow_quantization=False):
    """Refuses quantized weights (a quantization_config, or most elements
    stored as integers) unless ``allow_quantization``, and floating-point
    tensors whose dtype is not in ``allowed_float_dtypes`` (None: any)."""
    name = info.get("name", "model/")
    elements = info["dtype_elements"]
    total = sum(elements.values()) or 1
    if not allow_quantization:
        if info["quantization"]:
            method = info["quantization"].get("quant_method", "?") if isinstance(info["quantization"], dict) else "?"
            raise Invalid(f"{name} is quantized ({method}); this task allows only unquantized FP16/FP32 weights")
        integer = sum(n for d, n in elements.items() if d not in FLOAT_DTYPES)
        if integer > 0.01 * total:
            raise Invalid(f"{name} stores {integer / total:.0%} of its weights as integers (quantized); "
                          "this task allows only unquantized weights")
    if allowed_float_dtypes is not None:
        bad = sorted(d for d in elements if d in FLOAT_DTYPES and d not in allowed_float_dtypes)
        if bad:
            names = {"F16": "float16", "F32": "float32", "BF16": "bfloat16", "F64": "float64"}
            allowed = " or ".join(names.get(d, d) for d in allowed_float_dtypes)
            raise Invalid(f"{name} stores weights as {names.get(bad[0], bad[0])}; this task requires {allowed}")


def require_quantization(info, methods=("bitsandbytes",)):
    """Requires a quantized model: a quantization_config of one of
    ``methods`` (bitsandbytes: load_in_8bit or load_in_4bit)."""
    name = info.get("name", "model/")
    q = info["quantization"]
    if not isinstance(q, dict):
        raise Invalid(f"{name} is not quantized: config.json has no quantization_config "
                      f"(save a model quantized with {' or '.join(methods)})")
    method = q.get("quant_method")
    if method not in methods:
        raise Invalid(f"{name} uses quantization method {str(method)[:40]!r}; allowed: {', '.join(methods)}")
    if method == "bitsandbytes" and not (q.get("load_in_8bit") or q.get("load_in_4bit")):
        raise Invalid(f"{name} has a bitsandbytes quantization_config with neither load_in_8bit nor load_in_4bit")


def check_config(info, model_types=None, equals=None):
    """Checks config.json: ``model_types`` (allowed model_type values) and
    ``equals`` ({key: value} that must match exactly)."""
    name = info.get("name", "model/")
    config = info["config"]
    if model_types is not None and config.get("model_type") not in model_types:
        raise Invalid(f"{name} has model_type {str(config.get('model_type'))[:40]!r}; "
                      f"allowed: {', '.join(sorted(model_types))}")
    for key, value in (equals or {}).items():
        if config.get(key) != value:
            raise Invalid(f"{name}config.json has {key} = {str(config.get(key))[:40]}, "
                          f"but this task requires {key} = {value}")


_LIMIT_LABELS = {
    "parameters": "the parameter count",
    "peak_gpu_memory_gib": "the peak GPU memory",
    "perplexity": "the perplexity",
    "weight_bytes": "the size of the weights",
}


def _format_quantity(key, value):
    if isinstance(value, float) and key.endswith("_gib"):
        return f"{value:.3f} GiB"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def check_limits(values, maxima=None, minima=None):
    """Checks measured ``values`` ({name: number}) against ``maxima`` and
    ``minima`` ({name: bound}; a bound of None is skipped). The first
    violation raises :class:`Invalid` naming the quantity, the measured value
    and the bound, e.g. "the parameter count is 31,000,000, above the limit of
    30,500,000"."""
    for key, bound in (maxima or {}).items():
        if bound is None:
            continue
        if key not in values or values[key] is None:
            raise Invalid(f"{key} could not be measured, so its limit cannot be checked")
        if values[key] > bound:
            raise Invalid(f"{_LIMIT_LABELS.get(key, key.replace('_', ' '))} is "
                          f"{_format_quantity(key, values[key])}, above the limit of {_format_quantity(key, bound)}")
    for key, bound in (minima or {}).items():
        if bound is None:
            continue
        if key not in values or values[key] is None:
            raise Invalid(f"{key} could not be measured, so its limit cannot be checked")
        if values[key] < bound:
            raise Invalid(f"{_LIMIT_LABELS.get(key, key.replace('_', ' '))} is "
                          f"{_format_quantity(key, values[key])}, below the required {_format_quantity(key, bound)}")


# ---------------------------------------------------------------------------
# Loading models


_STAGED = []


def _cleanup_staged():
    for d in _STAGED:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_cleanup_staged)


def _stage(info):
    """A private folder of links to the checked files only, so transformers
    never sees pickles, custom code or generation_config.json."""
    staged = tempfile.mkdtemp(prefix="mlrb-model-")
    _STAGED.append(staged)
    src = os.path.abspath(info["path"])
    for f in list(info["weights"]) + list(info["tokenizer_files"]) + [
            f for f in MODEL_FILES if os.path.isfile(os.path.join(src, f))]:
        os.symlink(os.path.join(src, f), os.path.join(staged, f))
    return staged


def _dtype_kwarg():
    import transformers
    parts = re.findall(r"\d+", transformers.__version__)[:2]
    major, minor = (int(parts[0]), int(parts[1])) if len(parts) == 2 else (0, 0)
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def _architecture_kind(model_type, kind):
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)
    if kind in ("causal", "any") and model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "causal"
    if kind in ("seq2seq", "any") and model_type in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        return "seq2seq"
    wanted = {"causal": "a causal (decoder-only) language model",
              "seq2seq": "an encoder-decoder language model",
              "any": "a causal or encoder-decoder language model"}[kind]
    raise Invalid(f"model_type {model_type[:40]!r} is not {wanted} architecture built into transformers")


def load_language_model(info, device, kind="causal", dtype="auto"):
    """Loads a folder checked by :func:`inspect_model_folder` with
    transformers (``trust_remote_code=False``, safetensors only, offline).
    ``kind``: "causal", "seq2seq" or "any". Returns ``(model, tokenizer,
    kind)`` with the model in eval mode on ``device``."""
    offline_environment()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    transformers.logging.set_verbosity_error()
    with contextlib.suppress(Exception):
        transformers.utils.logging.disable_progress_bar()
    actual = _architecture_kind(info["config"]["model_type"], kind)
    staged = _stage(info)
    kwargs = {"trust_remote_code": False, "local_files_only": True, "use_safetensors": True,
              "output_loading_info": True, _dtype_kwarg(): dtype}
    quantized = bool(info["quantization"])
    if quantized:
        kwargs["device_map"] = {"": device.index if device.index is not None else device.type}
    cls = AutoModelForCausalLM if actual == "causal" else AutoModelForSeq2SeqLM
    with agent_code(f"loading {info['name']}"):
        model, loading = cls.from_pretrained(staged, **kwargs)
        missing = sorted(loading.get("missing_keys") or ())
        if missing:
            raise Invalid(f"{info['name']} weights do not match config.json: {len(missing)} tensor(s) missing "
                          f"(e.g. {missing[0][:80]}); they would be randomly initialised")
        if not quantized:
            model.to(device)
    model.eval()
    with agent_code(f"loading the tokenizer of {info['name']}"):
        tokenizer = AutoTokenizer.from_pretrained(staged, trust_remote_code=False, local_files_only=True)
    for p in model.parameters():
        p.requires_grad_(False)
    torch.set_grad_enabled(False)
    return model, tokenizer, actual


# Operators a TorchScript model may not contain (file access).
TORCHSCRIPT_FORBIDDEN_OPS = {"aten::from_file", "aten::save", "aten::load", "prim::PythonOp"}
TORCHSCRIPT_NAMESPACES = {"aten", "prim", "prims", "quantized", "onnx"}


def _graph_kinds(graph):
    for node in graph.nodes():
        yield node.kind()
        for block in node.blocks():
            yield from _graph_kinds(block)


def load_torchscript(path, device, name="model/model.pt", max_bytes=4 * GiB):
    """Loads a TorchScript module (``torch.jit.save``) after checking the file
    (regular, size-capped, a zip archive) and refuses graphs with operators
    that touch files or call Python. Returns the module in eval mode."""
    offline_environment()
    import zipfile

    import torch
    st = _lstat_regular(path, name)
    if st.st_size > max_bytes:
        raise Invalid(f"{name} is larger than {max_bytes / GiB:g} GiB")
    if not zipfile.is_zipfile(path):
        raise Invalid(f"{name} is not a TorchScript archive (save it with torch.jit.save)")
    with agent_code(f"loading {name} with torch.jit.load"):
        module = torch.jit.load(path, map_location=device)
    if not isinstance(module, torch.jit.ScriptModule):
        raise Invalid(f"{name} is not a TorchScript module")
    try:
        graph = module.inlined_graph
    except Exception:  # noqa: BLE001
        raise Invalid(f"{name} has no forward method")
    for kind in _graph_kinds(graph):
        namespace = kind.split("::", 1)[0]
        if kind in TORCHSCRIPT_FORBIDDEN_OPS or namespace not in TORCHSCRIPT_NAMESPACES:
            raise Invalid(f"{name} uses the operator {kind[:60]}, which is not allowed")
    module.eval()
    return module


def count_parameters(model):
    """``{"total", "trainable", "non_trainable"}`` parameter counts (shared
    tensors counted once, as ``model.parameters()`` yields them); floating
    point parameters count as trainable, integer (quantized) ones do not."""
    total = trainable = 0
    for p in model.parameters():
        n = p.numel()
        total += n
        if p.is_floating_point():
            trainable += n
    return {"total": total, "trainable": trainable, "non_trainable": total - trainable}


def model_max_length(model, cap):
    """The longest sequence the model accepts (from its config), at most ``cap``."""
    config = model.config
    for attr in ("n_positions", "max_position_embeddings", "n_ctx", "max_sequence_length",
                 "seq_length", "max_seq_len"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return min(value, cap)
    return cap


# ---------------------------------------------------------------------------
# Scoring with language models


def _encode(tokenizer, text, add_special_tokens=False):
    return list(tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])


def _prefix_token_id(tokenizer):
    for tid in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if tid is not None:
            return int(tid)
    raise Invalid("the tokenizer has neither a bos nor an eos token, needed to score text without context")


def _pad_token_id(tokenizer):
    for tid in (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.bos_token_id):
        if tid is not None:
            return int(tid)
    return 0


def _encode_pair_causal(tokenizer, context, continuation):
    """Token ids of context and continuation as lm-evaluation-harness forms
    them: trailing spaces of the context move to the continuation, the pair is
    encoded whole and split where the context's own encoding ends."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    if not context:
        return [_prefix_token_id(tokenizer)], _encode(tokenizer, continuation)
    whole = _encode(tokenizer, context + continuation)
    ctx = _encode(tokenizer, context)
    cont = whole[len(ctx):]
    if not cont or whole[:len(ctx)] != ctx:
        cont = _encode(tokenizer, continuation)
    return ctx, cont


def _batches(lengths, batch_tokens, max_batch):
    """Indices grouped into batches of at most ``batch_tokens`` padded tokens
    (and ``max_batch`` rows), in the given order (sorted longest first)."""
    batch, longest = [], 0
    for i, n in lengths:
        new_longest = max(longest, n)
        if batch and (new_longest * (len(batch) + 1) > batch_tokens or len(batch) >= max_batch):
            yield batch
            batch, new_longest = [], n
        batch.append(i)
        longest = new_longest
    if batch:
        yield batch


def loglikelihoods(model, tokenizer, requests, kind="causal", max_length=2048,
                   batch_tokens=4096, max_batch=64, what="scoring"):
    """Log-likelihood of each ``(context, continuation)`` pair:
    ``[(sum_logprob, is_greedy)]`` in request order. Causal models see the
    context and continuation truncated from the left to ``max_length``
    tokens; requests that share the same model input (e.g. single-token
    answer letters after one question) are computed in one forward pass.
    Encoder-decoder models get the context as encoder input."""
    import torch
    device = next(model.parameters()).device
    results = [None] * len(requests)
    if kind == "seq2seq":
        return _loglikelihoods_seq2seq(model, tokenizer, requests, max_length, batch_tokens, max_batch, what)
    groups = {}
    for i, (context, continuation) in enumerate(requests):
        ctx, cont = _encode_pair_causal(tokenizer, context, continuation)
        if not cont:
            results[i] = (0.0, True)
            continue
        seq = (ctx + cont)[-(max_length + 1):]
        inp = tuple(seq[:-1])
        n = min(len(cont), len(inp))
        groups.setdefault(inp, []).append((i, tuple(cont[-n:])))
    inputs = sorted(groups, key=lambda k: -len(k))
    pad = _pad_token_id(tokenizer)
    order = [(j, len(inp)) for j, inp in enumerate(inputs)]
    with agent_code(what):
        for batch in _batches(order, batch_tokens, max_batch):
            rows = [inputs[j] for j in batch]
            width = max(len(r) for r in rows)
            ids = torch.full((len(rows), width), pad, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for r, row in enumerate(rows):
                ids[r, :len(row)] = torch.tensor(row, dtype=torch.long)
                mask[r, :len(row)] = 1
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            for r, row in enumerate(rows):
                length = len(row)
                for i, cont in groups[row]:
                    n = len(cont)
                    lp = torch.log_softmax(logits[r, length - n:length].float(), dim=-1)
                    target = torch.tensor(cont, dtype=torch.long, device=lp.device)
                    ll = lp.gather(1, target.unsqueeze(1)).sum().item()
                    greedy = bool((lp.argmax(dim=-1) == target).all().item())
                    results[i] = (ll, greedy)
            del logits
    for i, r in enumerate(results):
        if r is None or not math.isfinite(r[0]):
            raise Invalid(f"{what}: the model produced a non-finite log-likelihood")
    return results


def _loglikelihoods_seq2seq(model, tokenizer, requests, max_length, batch_tokens, max_batch, what):
    import torch
    device = next(model.parameters()).device
    encoded = []
    for context, continuation in requests:
        enc = _encode(tokenizer, context, add_special_tokens=True)[-max_length:]
        cont = _encode(tokenizer, continuation, add_special_tokens=False)[:max_length]
        if not cont:
            cont = _encode(tokenizer, continuation, add_special_tokens=True)[:max_length]
        encoded.append((enc, cont))
    order = sorted(range(len(encoded)), key=lambda i: -(len(encoded[i][0]) + len(encoded[i][1])))
    pad = _pad_token_id(tokenizer)
    results = [None] * len(requests)
    lengths = [(i, len(encoded[i][0]) + len(encoded[i][1])) for i in order]
    with agent_code(what):
        for batch in _batches(lengths, batch_tokens, max_batch):
            enc_w = max(len(encoded[i][0]) for i in batch)
            dec_w = max(len(encoded[i][1]) for i in batch)
            ids = torch.full((len(batch), enc_w), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), enc_w), dtype=torch.long)
            labels = torch.full((len(batch), dec_w), -100, dtype=torch.long)
            for r, i in enumerate(batch):
                enc, cont = encoded[i]
                ids[r, :len(enc)] = torch.tensor(enc)
                mask[r, :len(enc)] = 1
                labels[r, :len(cont)] = torch.tensor(cont)
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                           labels=labels.to(device)).logits
            for r, i in enumerate(batch):
                cont = encoded[i][1]
                lp = torch.log_softmax(logits[r, :len(cont)].float(), dim=-1)
                target = torch.tensor(cont, dtype=torch.long, device=lp.device)
                ll = lp.gather(1, target.unsqueeze(1)).sum().item()
                results[i] = (ll, bool((lp.argmax(dim=-1) == target).all().item()))
            del logits
    for r in results:
        if r is None or not math.isfinite(r[0]):
            raise Invalid(f"{what}: the model produced a non-finite log-likelihood")
    return results


def multiple_choice(model, tokenizer, items, kind="causal", max_length=2048, normalize=None,
                    batch_tokens=4096, what="multiple choice"):
    """Accuracy on ``choice`` items: the prediction is the choice with the
    highest log-likelihood (``normalize="chars"``: divided by the choice's
    length in characters, lm-evaluation-harness's acc_norm); ties go to the
    first choice. Returns ``(accuracy, predictions)``."""
    requests = [(item["context"], choice) for item in items for choice in item["choices"]]
    lls = loglikelihoods(model, tokenizer, requests, kind=kind, max_length=max_length,
                         batch_tokens=batch_tokens, what=what)
    predictions, correct, k = [], 0, 0
    for item in items:
        scores = []
        for choice in item["choices"]:
            ll = lls[k][0]
            k += 1
            if normalize == "chars":
                ll = ll / max(1, len(choice))
            scores.append(ll)
        pred = max(range(len(scores)), key=lambda j: (scores[j], -j))
        predictions.append(pred)
        correct += int(pred == item["label"])
    return correct / max(1, len(items)), predictions


def pair_accuracy(model, tokenizer, items, max_length=2048, batch_tokens=4096, what="sentence pairs"):
    """Fraction of ``pairs`` items whose good sentence has a strictly higher
    total log-probability than the bad one (both scored after the bos/eos
    token, as lm-evaluation-harness does for BLiMP)."""
    requests = []
    for item in items:
        requests.append(("", item["good"]))
        requests.append(("", item["bad"]))
    lls = loglikelihoods(model, tokenizer, requests, kind="causal", max_length=max_length,
                         batch_tokens=batch_tokens, what=what)
    correct = sum(1 for j in range(len(items)) if lls[2 * j][0] > lls[2 * j + 1][0])
    return correct / max(1, len(items))


def _cut_at_stop(text, stop):
    cut = len(text)
    for s in stop or ():
        pos = text.find(s)
        if pos != -1:
            cut = min(cut, pos)
    return text[:cut]


def generate_texts(model, tokenizer, prompts, kind="causal", max_new_tokens=128, max_length=2048,
                   stop=None, batch_size=8, what="generation"):
    """Greedy continuations of ``prompts`` (without the prompt), cut at the
    first of the ``stop`` strings. Prompts are truncated from the left so that
    prompt plus new tokens fit ``max_length``; batches of ``batch_size``
    prompts (longest first, left-padded) keep the output deterministic."""
    import torch
    device = next(model.parameters()).device
    max_new_tokens = max(1, min(max_new_tokens, max_length // 2))
    pad = _pad_token_id(tokenizer)
    eos = tokenizer.eos_token_id
    budget = max_length - max_new_tokens if kind == "causal" else max_length
    encoded = []
    for p in prompts:
        ids = _encode(tokenizer, p, add_special_tokens=(kind == "seq2seq"))
        ids = ids[-budget:] if kind == "causal" else ids[:budget]
        encoded.append(ids or [_prefix_token_id(tokenizer)])
    order = sorted(range(len(prompts)), key=lambda i: -len(encoded[i]))
    outputs = [None] * len(prompts)
    with agent_code(what):
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            width = max(len(encoded[i]) for i in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, i in enumerate(batch):
                seq = encoded[i]
                if kind == "causal":  # left padding
                    ids[r, width - len(seq):] = torch.tensor(seq)
                    mask[r, width - len(seq):] = 1
                else:
                    ids[r, :len(seq)] = torch.tensor(seq)
                    mask[r, :len(seq)] = 1
            out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                 max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                 pad_token_id=pad, eos_token_id=eos)
            new = out[:, width:] if kind == "causal" else out[:, 1:]
            for r, i in enumerate(batch):
                text = tokenizer.decode(new[r].tolist(), skip_special_tokens=True)
                outputs[i] = _cut_at_stop(text, stop)
    return outputs


def perplexity(model, tokenizer, text, context_length=1024, stride=512, max_tokens=None,
               batch_size=8, what="perplexity"):
    """Perplexity of a causal model on ``text`` with a sliding window of
    ``context_length`` tokens moved by ``stride``: every token after the first
    is predicted once, with up to ``context_length - stride`` tokens of
    already-scored context (the standard fixed-length-model evaluation).
    ``max_tokens`` caps the tokens of text used. Returns a float."""
    import torch
    device = next(model.parameters()).device
    if not 0 < stride <= context_length:
        raise ValueError("perplexity needs 0 < stride <= context_length")
    ids = _encode(tokenizer, text)
    if max_tokens:
        ids = ids[:max_tokens]
    if len(ids) < 2:
        raise ValueError("perplexity text is too short")
    windows = []  # (begin, end, number of new targets)
    prev_end = 0
    for begin in range(0, len(ids), stride):
        end = min(begin + context_length, len(ids))
        windows.append((begin, end, end - max(prev_end, begin + 1)))
        prev_end = end
        if end == len(ids):
            break
    nll, count = 0.0, 0
    with agent_code(what):
        for start in range(0, len(windows), batch_size):
            chunk = windows[start:start + batch_size]
            width = max(e - b for b, e, _ in chunk)
            pad = _pad_token_id(tokenizer)
            x = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for r, (b, e, _) in enumerate(chunk):
                x[r, :e - b] = torch.tensor(ids[b:e])
                mask[r, :e - b] = 1
            logits = model(input_ids=x.to(device), attention_mask=mask.to(device)).logits
            for r, (b, e, n_new) in enumerate(chunk):
                length = e - b
                lp = torch.log_softmax(logits[r, length - n_new - 1:length - 1].float(), dim=-1)
                target = torch.tensor(ids[e - n_new:e], dtype=torch.long, device=lp.device)
                nll -= lp.gather(1, target.unsqueeze(1)).sum().item()
                count += n_new
            del logits
    value = math.exp(nll / count) if count and nll / count < 700 else float("inf")
    if not math.isfinite(value):
        raise Invalid(f"{what}: the model's perplexity is not finite")
    return value


def reset_peak_memory():
    """Starts a new peak-memory measurement on the GPU (no-op on a CPU)."""
    import gc

    import torch
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_bytes():
    """Peak GPU memory allocated by tensors since :func:`reset_peak_memory`
    (model weights included), or None without a GPU."""
    import torch
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())


def long_prompt(tokenizer, n_tokens):
    """A fixed English prompt of exactly ``n_tokens`` tokens (PROBE_TEXT
    repeated and cut)."""
    ids = []
    while len(ids) < n_tokens:
        ids += _encode(tokenizer, PROBE_TEXT)
    return ids[:n_tokens]


# The smoke profile (toy models on the CPU; its scores measure nothing).
SMOKE = os.environ.get("MLRB_SMOKE") == "1"


def generation_benchmark(model, tokenizer, prompts=PROBE_PROMPTS, kind="causal", new_tokens=128,
                         warmup=3, runs=3, max_length=2048, prompt_token_ids=None, what="throughput"):
    """Generation throughput and latency at batch size 1: each prompt is
    continued greedily by exactly ``new_tokens`` tokens (end-of-sequence
    suppressed), after ``warmup`` untimed generations, ``runs`` times over the
    prompt set. Returns ``tokens_per_second`` (new tokens over total time),
    ``ms_per_token`` (median over generations), ``latency_ms`` (median time
    of one generation) and ``peak_gpu_memory_bytes`` (None on a CPU).
    ``prompt_token_ids`` (a list of token-id lists) replaces ``prompts``.
    In the smoke profile the same code times a few tokens of two prompts."""
    import torch
    device = next(model.parameters()).device
    new_tokens = max(1, min(new_tokens, max_length // 2))
    if prompt_token_ids is None:
        prompt_token_ids = [_encode(tokenizer, p, add_special_tokens=(kind == "seq2seq")) for p in prompts]
    if SMOKE:
        new_tokens, warmup, runs, prompt_token_ids = min(new_tokens, 4), min(warmup, 1), 1, prompt_token_ids[:2]
    budget = max_length - new_tokens if kind == "causal" else max_length
    inputs = [torch.tensor([ids[-budget:] or [_prefix_token_id(tokenizer)]], device=device)
              for ids in prompt_token_ids]
    pad = _pad_token_id(tokenizer)
    gen = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False,
           "num_beams": 1, "pad_token_id": pad, "eos_token_id": tokenizer.eos_token_id}

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def one(x):
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), **gen)
        return out.shape[1] - (x.shape[1] if kind == "causal" else 1)

    with agent_code(what):
        for _ in range(warmup):
            one(inputs[0])
        reset_peak_memory()
        total_tokens, total_time, per_token, latencies = 0, 0.0, [], []
        for _ in range(runs):
            for x in inputs:
                sync()
                t0 = time.perf_counter()
                n = one(x)
                sync()
                dt = time.perf_counter() - t0
                total_tokens += n
                total_time += dt
                latencies.append(dt * 1000)
                per_token.append(dt * 1000 / max(1, n))
        peak = peak_memory_bytes()
    per_token.sort()
    latencies.sort()
    return {
        "tokens_per_second": total_tokens / total_time if total_time > 0 else 0.0,
        "ms_per_token": per_token[len(per_token) // 2],
        "latency_ms": latencies[len(latencies) // 2],
        "peak_gpu_memory_bytes": peak,
        "new_tokens": new_tokens, "generations": len(latencies),
        "prompt_tokens": [int(x.shape[1]) for x in inputs],
    }


# ---------------------------------------------------------------------------
# Text metrics and answer extraction


def tokenize_words(text):
    """Lower-cased alphanumeric tokens (rouge-score's default tokenization)."""
    return re.findall(r"[a-z0-9]+", text.lower())


def rouge_l(prediction, reference, max_tokens=2000):
    """ROUGE-L F1 of two strings (longest common subsequence of
    :func:`tokenize_words` tokens, each side cut to ``max_tokens``)."""
    a = tokenize_words(prediction)[:max_tokens]
    b = tokenize_words(reference)[:max_tokens]
    if not a or not b:
        return 0.0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    p, r = lcs / len(a), lcs / len(b)
    return 2 * p * r / (p + r)


def _bleu_tokens(text):
    return re.findall(r"\w+|[^\w\s]", text)


def corpus_bleu(predictions, references, max_n=4):
    """Corpus BLEU (0-1) with one reference per prediction: uniform weights
    over 1..``max_n``-grams and the brevity penalty; words and punctuation
    marks are tokens."""
    matches = [0] * max_n
    totals = [0] * max_n
    pred_len = ref_len = 0
    for pred, ref in zip(predictions, references):
        p, r = _bleu_tokens(pred), _bleu_tokens(ref)
        pred_len += len(p)
        ref_len += len(r)
        for n in range(1, max_n + 1):
            pc, rc = {}, {}
            for i in range(len(p) - n + 1):
                g = tuple(p[i:i + n])
                pc[g] = pc.get(g, 0) + 1
            for i in range(len(r) - n + 1):
                g = tuple(r[i:i + n])
                rc[g] = rc.get(g, 0) + 1
            matches[n - 1] += sum(min(c, rc.get(g, 0)) for g, c in pc.items())
            totals[n - 1] += max(0, len(p) - n + 1)
    if pred_len == 0 or min(matches) == 0:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n
    bp = 1.0 if pred_len > ref_len else math.exp(1 - ref_len / pred_len)
    return bp * math.exp(log_precision)


_NUMBER = r"-?\$?\s?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+"


def _clean_number(text):
    text = text.replace(",", "").replace("$", "").replace(" ", "")
    if text.endswith("."):
        text = text[:-1]
    return text


def extract_number(text):
    """The final numeric answer in a generated solution, as a string without
    thousands separators: after ``####`` (GSM8K's format) if present, else
    after "answer is", else the last number in the text. None if there is none."""
    for pattern in (r"####\s*(" + _NUMBER + ")", r"answer is[:\s]*(" + _NUMBER + ")"):
        m = re.search(pattern, text, flags=re.IGNORECASE)
        if m:
            return _clean_number(m.group(1))
    found = re.findall(_NUMBER, text)
    return _clean_number(found[-1]) if found else None


def numbers_match(prediction, gold, rel_tol=1e-6, abs_tol=1e-6):
    """Whether two numeric strings denote the same number."""
    if prediction is None or gold is None:
        return False
    try:
        a, b = float(_clean_number(str(prediction))), float(_clean_number(str(gold)))
    except ValueError:
        return False
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)


def extract_choice(text, n_choices=4):
    """Index of the answer letter in a generated answer ("The answer is (B)",
    "B.", "(c)", "Answer: D"), or None. Letters beyond ``n_choices`` are
    ignored."""
    letters = "ABCDEFGHIJ"[:n_choices]
    cls = f"[{letters}{letters.lower()}]"
    patterns = (
        rf"answer\s*(?:is|:)\s*\(?({cls})\b",
        rf"^\s*\(?({cls})\s*[\).:]",
        rf"^\s*({cls})\s*$",
        rf"\(({cls})\)",
        rf"\b([{letters}])\b",
    )
    for pattern in patterns:
        m = re.search(pattern, text, flags=re.MULTILINE)
        if m:
            return letters.index(m.group(1).upper())
    return None


def normalize_answer(text):
    """SQuAD-style normalisation: lower case, no punctuation, no articles,
    single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch.isspace())
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction, gold):
    """Exact match after :func:`normalize_answer`."""
    return normalize_answer(prediction) == normalize_answer(gold)


# ---------------------------------------------------------------------------
# Image classifiers (TorchScript)


def read_image_spec(path, name="model/preprocess.json"):
    """The preprocessing a TorchScript image classifier expects, from the
    workspace: ``image_size`` (16-4096, square resize), ``channels`` ("RGB" or
    "L"), ``mean`` and ``std`` (one value per channel), ``batch_size``
    (1-1024), ``dtype`` ("float32" or "float16"), ``interpolation``
    ("bilinear", "bicubic", "nearest", "area")."""
    spec = read_workspace_json(path, name)
    out = {
        "image_size": _int_in(spec, name, "image_size", 16, 4096),
        "channels": _choice(spec, name, "channels", ("RGB", "L"), "RGB"),
    }
    n = 3 if out["channels"] == "RGB" else 1
    for key, default in (("mean", [0.0] * n), ("std", [1.0] * n)):
        value = spec.get(key, default)
        if (not isinstance(value, list) or len(value) != n
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)):
            raise Invalid(f"{name}: {key} must be a list of {n} numbers")
        if key == "std" and any(v <= 0 for v in value):
            raise Invalid(f"{name}: std values must be positive")
        out[key] = [float(v) for v in value]
    out["batch_size"] = _int_in(spec, name, "batch_size", 1, 1024, default=64)
    out["dtype"] = _choice(spec, name, "dtype", ("float32", "float16"), "float32")
    out["interpolation"] = _choice(spec, name, "interpolation", ("bilinear", "bicubic", "nearest", "area"), "bilinear")
    return out


def _int_in(spec, name, key, low, high, default=None):
    """``spec[key]`` (or ``default``), an integer from ``low`` to ``high``."""
    value = spec.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise Invalid(f"{name}: {key} must be an integer from {low} to {high}")
    return value


def _choice(spec, name, key, choices, default):
    """``spec[key]`` (or ``default``), one of ``choices``."""
    value = spec.get(key, default)
    if value not in choices:
        raise Invalid(f"{name}: {key} must be one of " + ", ".join(f'"{c}"' for c in choices))
    return value


def _load_image(path, spec):
    import numpy as np
    from PIL import Image
    filters = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC, "nearest": Image.NEAREST,
               "area": getattr(Image, "BOX", Image.BILINEAR)}
    size = spec["image_size"]
    with Image.open(path) as img:
        if img.format == "JPEG":
            img.draft(spec["channels"], (size, size))  # decode at reduced scale when possible
        img = img.convert(spec["channels"]).resize((size, size), filters[spec["interpolation"]])
        arr = np.asarray(img, dtype=np.float32) / 255.0
    if arr.ndim == 2:
        arr = arr[:, :, None]
    mean = np.asarray(spec["mean"], dtype=np.float32)
    std = np.asarray(spec["std"], dtype=np.float32)
    return ((arr - mean) / std).transpose(2, 0, 1)


def classify_images(module, image_paths, spec, device, num_classes, what="classifying the test images",
                    max_seconds=3600):
    """Runs a TorchScript classifier over image files as :func:`read_image_spec`
    describes (decode, resize, normalise, batch, forward, argmax). Returns
    ``(predictions, seconds, peak_gpu_memory_bytes)``: the time covers the
    whole loop (decoding included) after one untimed warm-up batch. A loop
    that runs longer than ``max_seconds`` is stopped (:class:`Invalid`)."""
    import numpy as np
    import torch
    dtype = torch.float16 if spec["dtype"] == "float16" else torch.float32
    bs = spec["batch_size"]

    def batch_tensor(paths):
        return torch.from_numpy(np.stack([_load_image(p, spec) for p in paths])).to(device=device, dtype=dtype)

    def forward(x):
        out = module(x)
        if isinstance(out, (tuple, list)):
            out = out[0]
        if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != x.shape[0] \
                or out.shape[1] != num_classes:
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise Invalid(f"the model must return logits of shape [batch, {num_classes}], got {shape}")
        return out.argmax(dim=1)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    with agent_code(what), torch.inference_mode():
        forward(batch_tensor(image_paths[:bs]))  # warm-up
        reset_peak_memory()
        predictions = []
        sync()
        t0 = time.perf_counter()
        for start in range(0, len(image_paths), bs):
            predictions.append(forward(batch_tensor(image_paths[start:start + bs])).cpu())
            if time.perf_counter() - t0 > max_seconds:
                raise Invalid(f"{what}: inference took longer than {max_seconds} seconds")
        sync()
        seconds = time.perf_counter() - t0
        peak = peak_memory_bytes()
    return [int(v) for v in torch.cat(predictions).tolist()], seconds, peak


def evaluate_image_classifier(workspace, hidden, *, num_classes, test_dir="test", model_dir="model",
                              max_peak_gpu_memory_gib=None, max_parameters=None, metric="accuracy"):
    """Scores ``<workspace>/model/model.pt`` (TorchScript) with
    ``model/preprocess.json`` on the hidden test images
    (``<hidden>/<test_dir>/labels.jsonl``: ``{"file", "label"}``).
    ``metric``: "accuracy", or "twe" (accuracy squared over inference minutes,
    the Budgeted Inference Challenge's score). Checks the GPU-memory and
    parameter limits. Returns ``(score, details)``."""
    started = time.time()
    offline_environment()
    set_determinism(0)
    device = pick_device()
    spec = read_image_spec(os.path.join(workspace, model_dir, "preprocess.json"), f"{model_dir}/preprocess.json")
    module = load_torchscript(os.path.join(workspace, model_dir, "model.pt"), device, f"{model_dir}/model.pt")
    params = sum(p.numel() for p in module.parameters())
    details = {"parameters": params, "preprocess": spec}
    check_limits({"parameters": params}, {"parameters": max_parameters})
    labels = read_jsonl(os.path.join(hidden, test_dir, "labels.jsonl"))
    paths = [os.path.join(hidden, test_dir, rec["file"]) for rec in labels]
    predictions, seconds, peak = classify_images(module, paths, spec, device, num_classes)
    accuracy = sum(int(p == rec["label"]) for p, rec in zip(predictions, labels)) / len(labels)
    details.update({"accuracy": accuracy, "inference_seconds": seconds, "test_images": len(labels),
                    "peak_gpu_memory_gib": None if peak is None else peak / GiB})
    if max_peak_gpu_memory_gib is not None and peak is not None:
        check_limits({"peak_gpu_memory_gib": peak / GiB}, {"peak_gpu_memory_gib": max_peak_gpu_memory_gib})
    details["evaluation_seconds"] = time.time() - started
    if metric == "accuracy":
        return accuracy, details
    if metric == "twe":
        minutes = max(seconds / 60.0, 1e-6)
        details["twe"] = accuracy ** 2 / minutes
        return accuracy ** 2 / minutes, details
    raise ValueError(f"unknown metric {metric!r}")


# ---------------------------------------------------------------------------
# Whole evaluations of language models


def evaluate_component(model, tokenizer, kind, component, hidden, max_length, batch_tokens=4096):
    """Scores one benchmark component (see the module docstring for the data
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

    Returns ``(score, details)``."""
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
    error_details = details

    def invalid(e):
        e.details = error_details
        return e

    try:
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

        offline_environment()
        set_determinism(seed)
        device = pick_device()
        import torch
        import transformers
        details["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
        if device.type == "cuda":
            details["device"] = torch.cuda.get_device_name(device)
        log(f"loading {name} ...")
        model, tokenizer, actual_kind = load_language_model(info, device, kind=kind)
        details["architecture"] = actual_kind
        counts = count_parameters(model)
        details["parameters"] = counts
        check_limits({"parameters": counts["total"]}, {"parameters": max_params})
        max_length = model_max_length(model, max_length_cap)
        details["max_length"] = max_length

        # Probe: memory limit (edge tasks) and throughput / latency.
        if probe is not None:
            log("memory and throughput probe ...")
            n_prompt = min(probe.get("prompt_tokens", 512), max_length - probe.get("new_tokens", 128))
            ids = [long_prompt(tokenizer, max(1, n_prompt))]
            stats = generation_benchmark(model, tokenizer, kind=actual_kind, new_tokens=probe.get("new_tokens", 128),
                                         warmup=probe.get("warmup", 1), runs=probe.get("runs", 3),
                                         max_length=max_length, prompt_token_ids=ids, what="the memory probe")
            peak = stats["peak_gpu_memory_bytes"]
            details["probe"] = dict(stats, peak_gpu_memory_gib=None if peak is None else peak / GiB)
            if requirements.get("max_peak_gpu_memory_gib") is not None:
                if peak is None:
                    log("no GPU: the memory limit is not checked")
                else:
                    check_limits({"peak_gpu_memory_gib": peak / GiB},
                                 {"peak_gpu_memory_gib": requirements["max_peak_gpu_memory_gib"]})
        else:
            log("throughput probe ...")
            try:
                stats = generation_benchmark(model, tokenizer, kind=actual_kind, new_tokens=64, warmup=1, runs=1,
                                             max_length=max_length)
                details["throughput"] = stats
            except Invalid as e:  # information only
                details["throughput"] = {"error": str(e)}

        if perplexity_spec is not None and actual_kind == "causal":
            log("perplexity ...")
            with open(os.path.join(hidden, perplexity_spec["file"]), encoding="utf-8") as f:
                text = f.read()
            ctx = min(perplexity_spec.get("context_length", 1024), max_length)
            stride = min(perplexity_spec.get("stride") or ctx // 2, max(1, ctx // 2))
            try:
                details["perplexity"] = perplexity(model, tokenizer, text, context_length=ctx, stride=stride,
                                                   max_tokens=perplexity_spec.get("max_tokens"))
                details["perplexity_context"] = {"context_length": ctx, "stride": stride}
            except Invalid as e:
                if perplexity_spec.get("required"):
                    raise
                details["perplexity"] = {"error": str(e)}

        results = {}
        for comp in components:
            log(f"{comp['name']} ...")
            value, extra = evaluate_component(model, tokenizer, actual_kind, comp, hidden, max_length, batch_tokens)
            results[comp["name"]] = value
            details[comp["name"]] = dict(extra, score=value)
            log(f"{comp['name']}: {value:.4f}")
        details["components"] = results
        if score_fn is not None:
            score = score_fn({"model": model, "tokenizer": tokenizer, "kind": actual_kind, "device": device,
                              "details": details, "components": results, "hidden": hidden,
                              "max_length": max_length, "info": info})
        else:
            w = weights or {}
            total = sum(w.get(k, 1.0) for k in results)
            score = sum(w.get(k, 1.0) * v for k, v in results.items()) / total
    except Invalid as e:
        details["evaluation_seconds"] = time.time() - started
        raise invalid(e)
    details["evaluation_seconds"] = time.time() - started
    return score, details


# ---------------------------------------------------------------------------
# Prepare (network): building the held-out data


def prepare_main(build):
    """Runs ``build(public_dir, hidden_dir)`` for ``prepare.py <public_dir>
    <hidden_dir>``, then writes ``<hidden_dir>/manifest.json`` with the size
    and SHA-256 of every hidden file (so two runs can be compared)."""
    if len(sys.argv) != 3:
        sys.exit("usage: prepare.py <public_dir> <hidden_dir>")
    public, hidden = sys.argv[1], sys.argv[2]
    os.makedirs(public, exist_ok=True)
    os.makedirs(hidden, exist_ok=True)
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    build(public, hidden)
    manifest = {}
    for root, _dirs, files in os.walk(hidden):
        for f in files:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, hidden)
            if rel == "manifest.json":
                continue
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            manifest[rel] = {"bytes": os.path.getsize(p), "sha256": h.hexdigest()}
    with open(os.path.join(hidden, "manifest.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    log(f"prepared {len(manifest)} hidden files")


def hub_dataset(paths, name=None, split="test"):
    """One split of a Hugging Face hub data set, trying each repository id in
    ``paths`` (a string or a list: data sets move between ids), first at its
    default revision and then at its Parquet export
    (``refs/convert/parquet``), for data sets that still need a loading
    script. Raises the last error when none loads."""
    import datasets
    if isinstance(paths, str):
        paths = [paths]
    last = None
    for path in paths:
        for revision in (None, "refs/convert/parquet"):
            try:
                kwargs = {"split": split}
                if revision:
                    kwargs["revision"] = revision
                ds = datasets.load_dataset(path, name, **kwargs)
                log(f"loaded {path}{'/' + name if name else ''} [{split}] ({len(ds)} rows)")
                return ds
            except Exception as e:  # noqa: BLE001 - try the next source
                last = e
                log(f"could not load {path} {name or ''} {split} at {revision or 'main'}: {one_line(e, 200)}")
    raise RuntimeError(f"no source of {paths} {name or ''} [{split}] could be loaded") from last


def subsample(n_total, n, seed=0):
    """``n`` distinct indices of ``range(n_total)`` chosen with a fixed seed,
    in increasing order (all of them when ``n`` is None or large enough)."""
    if n is None or n >= n_total:
        return list(range(n_total))
    return sorted(random.Random(seed).sample(range(n_total), n))


def _rows(ds, indices):
    return [ds[i] for i in indices]


MMLU_SOURCES = ["cais/mmlu"]


def build_mmlu(per_subject=None, subjects=None, split="test", seed=0, prefix="mmlu"):
    """MMLU as ``choice`` items in lm-evaluation-harness's zero-shot format
    ("The following are multiple choice questions (with answers) about
    <subject>." / question / A.-D. / "Answer:", choices " A" ... " D").
    ``per_subject`` questions per subject (fixed seed), all subjects unless
    ``subjects`` names some."""
    if subjects is None:
        ds = hub_dataset(MMLU_SOURCES, "all", split)
        by_subject = {}
        for i, s in enumerate(ds["subject"]):
            by_subject.setdefault(s, []).append(i)
        groups = [(s, by_subject[s], ds) for s in sorted(by_subject)]
    else:
        groups = []
        for s in subjects:
            ds = hub_dataset(MMLU_SOURCES, s, split)
            groups.append((s, list(range(len(ds))), ds))
    items = []
    for s, idx, ds in groups:
        chosen = [idx[j] for j in subsample(len(idx), per_subject, seed)]
        for i in chosen:
            row = ds[i]
            subject = s.replace("_", " ")
            text = (f"The following are multiple choice questions (with answers) about {subject}.\n\n"
                    f"{row['question'].strip()}\n"
                    + "".join(f"{'ABCD'[k]}. {c}\n" for k, c in enumerate(row["choices"]))
                    + "Answer:")
            items.append({"id": f"{prefix}-{s}-{i}", "subject": s, "context": text,
                          "choices": [" A", " B", " C", " D"], "label": int(row["answer"])})
    return items


def _hellaswag_clean(text):
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def build_hellaswag(n=1000, seed=0):
    """HellaSwag (validation) as ``choice`` items scored with acc_norm
    (lm-evaluation-harness's preprocessing)."""
    ds = hub_dataset(["Rowan/hellaswag", "hellaswag"], None, "validation")
    items = []
    for i in subsample(len(ds), n, seed):
        row = ds[i]
        ctx = row["ctx_a"] + " " + row["ctx_b"].capitalize()
        items.append({"id": f"hellaswag-{i}", "context": _hellaswag_clean(row["activity_label"] + ": " + ctx),
                      "choices": [" " + _hellaswag_clean(e) for e in row["endings"]], "label": int(row["label"])})
    return items


def build_arc(config="ARC-Easy", n=1000, split="test", seed=0):
    """ARC ("ARC-Easy" or "ARC-Challenge") as ``choice`` items
    ("Question: ...\\nAnswer:" followed by the answer text)."""
    ds = hub_dataset(["allenai/ai2_arc", "ai2_arc"], config, split)
    items = []
    for i in subsample(len(ds), n, seed):
        row = ds[i]
        labels = list(row["choices"]["label"])
        if row["answerKey"] not in labels:
            continue
        items.append({"id": f"arc-{i}", "context": f"Question: {row['question']}\nAnswer:",
                      "choices": [" " + t for t in row["choices"]["text"]],
                      "label": labels.index(row["answerKey"])})
    return items


# The 67 paradigms (configs) of BLiMP.
BLIMP_PARADIGMS = tuple("""
adjunct_island anaphor_gender_agreement anaphor_number_agreement animate_subject_passive animate_subject_trans
causative complex_NP_island coordinate_structure_constraint_complex_left_branch
coordinate_structure_constraint_object_extraction determiner_noun_agreement_1 determiner_noun_agreement_2
determiner_noun_agreement_irregular_1 determiner_noun_agreement_irregular_2 determiner_noun_agreement_with_adj_2
determiner_noun_agreement_with_adj_irregular_1 determiner_noun_agreement_with_adj_irregular_2
determiner_noun_agreement_with_adjective_1 distractor_agreement_relational_noun
distractor_agreement_relative_clause drop_argument ellipsis_n_bar_1 ellipsis_n_bar_2
existential_there_object_raising existential_there_quantifiers_1 existential_there_quantifiers_2
existential_there_subject_raising expletive_it_object_raising inchoative intransitive
irregular_past_participle_adjectives irregular_past_participle_verbs irregular_plural_subject_verb_agreement_1
irregular_plural_subject_verb_agreement_2 left_branch_island_echo_question left_branch_island_simple_question
matrix_question_npi_licensor_present npi_present_1 npi_present_2 only_npi_licensor_present only_npi_scope
passive_1 passive_2 principle_A_c_command principle_A_case_1 principle_A_case_2 principle_A_domain_1
principle_A_domain_2 principle_A_domain_3 principle_A_reconstruction regular_plural_subject_verb_agreement_1
regular_plural_subject_verb_agreement_2 sentential_negation_npi_licensor_present sentential_negation_npi_scope
sentential_subject_island superlative_quantifiers_1 superlative_quantifiers_2 tough_vs_raising_1
tough_vs_raising_2 transitive wh_island wh_questions_object_gap wh_questions_subject_gap
wh_questions_subject_gap_long_distance wh_vs_that_no_gap wh_vs_that_no_gap_long_distance wh_vs_that_with_gap
wh_vs_that_with_gap_long_distance""".split())


def build_blimp(per_paradigm=None, seed=0):
    """BLiMP (all 67 paradigms, sorted) as ``pairs`` items."""
    import datasets
    source = "nyu-mll/blimp"
    try:
        configs = sorted(datasets.get_dataset_config_names(source))
    except Exception:  # noqa: BLE001
        source = "blimp"
        configs = sorted(datasets.get_dataset_config_names(source))
    if configs == ["default"]:  # an offline cache (HF_DATASETS_OFFLINE) cannot list the configs
        configs = sorted(BLIMP_PARADIGMS)
    items = []
    for c in configs:
        ds = hub_dataset([source, "nyu-mll/blimp", "blimp"], c, "train")
        for i in subsample(len(ds), per_paradigm, seed):
            row = ds[i]
            items.append({"id": f"blimp-{c}-{i}", "paradigm": c, "good": row["sentence_good"],
                          "bad": row["sentence_bad"]})
    return items


def build_gsm8k(n=250, seed=0):
    """GSM8K (test) as ``numeric`` items, zero-shot
    ("Question: ...\\nAnswer:"; the gold answer is the number after ####)."""
    ds = hub_dataset(["openai/gsm8k", "gsm8k"], "main", "test")
    items = []
    for i in subsample(len(ds), n, seed):
        row = ds[i]
        gold = _clean_number(row["answer"].split("####")[-1].strip())
        items.append({"id": f"gsm8k-{i}", "prompt": f"Question: {row['question']}\nAnswer:", "answer": gold})
    return items


SUPERGLUE_SOURCES = ["aps/super_glue", "super_glue"]


def build_superglue(tasks=("boolq", "cb", "copa", "rte", "wic", "wsc"), n_per_task=1000, seed=0):
    """SuperGLUE validation sets as zero-shot ``choice`` items in the prompt
    formats of lm-evaluation-harness's super-glue-lm-eval-v1. Returns
    ``{task: items}``."""
    out = {}
    for task in tasks:
        config = "wsc.fixed" if task == "wsc" else task
        ds = hub_dataset(SUPERGLUE_SOURCES, config, "validation")
        items = []
        for i in subsample(len(ds), n_per_task, seed):
            r = ds[i]
            if task == "boolq":
                ctx, ch = f"{r['passage']}\nQuestion: {r['question']}?\nAnswer:", [" no", " yes"]
            elif task == "cb":
                ctx = f"{r['premise']}\nQuestion: {r['hypothesis']}. True, False, or Neither?\nAnswer:"
                ch = [" True", " False", " Neither"]
            elif task == "copa":
                connector = {"cause": "because", "effect": "therefore"}[r["question"]]
                ctx = r["premise"].strip()[:-1] + f" {connector}"
                ch = [" " + c[0].lower() + c[1:] for c in (r["choice1"], r["choice2"])]
            elif task == "rte":
                ctx, ch = f"{r['premise']}\nQuestion: {r['hypothesis']} True or False?\nAnswer:", [" True", " False"]
            elif task == "wic":
                word = r["sentence1"][r["start1"]:r["end1"]]
                ctx = (f"Sentence 1: {r['sentence1']}\nSentence 2: {r['sentence2']}\nQuestion: Is the word "
                       f"'{word}' used in the same way in the two sentences above?\nAnswer:")
                ch = [" no", " yes"]
            elif task == "wsc":
                ctx = (f"Passage: {r['text']}\nQuestion: In the passage above, does the pronoun "
                       f"\"*{r['span2_text']}*\" refer to \"*{r['span1_text']}*\"?\nAnswer:")
                ch = [" no", " yes"]
            else:
                raise ValueError(f"unsupported SuperGLUE task {task!r}")
            items.append({"id": f"{task}-{i}", "context": ctx, "choices": ch, "label": int(r["label"])})
        out[task] = items
    return out


GLUE_SOURCES = ["nyu-mll/glue", "glue"]


def build_glue(tasks=("cola", "mnli", "mrpc", "qnli", "qqp", "rte", "sst2", "wnli"), n_per_task=1000, seed=0):
    """GLUE validation sets as zero-shot ``choice`` items in the prompt
    formats of lm-evaluation-harness's glue group. Returns ``{task: items}``."""
    out = {}
    for task in tasks:
        split = "validation_matched" if task == "mnli" else "validation"
        ds = hub_dataset(GLUE_SOURCES, task, split)
        items = []
        for i in subsample(len(ds), n_per_task, seed):
            r = ds[i]
            label = int(r["label"])
            if task == "cola":
                ctx, ch = f"{r['sentence']}\nQuestion: Does this sentence make sense?\nAnswer:", [" no", " yes"]
            elif task == "sst2":
                ctx = f"{r['sentence']}\nQuestion: Is this sentence positive or negative?\nAnswer:"
                ch = [" negative", " positive"]
            elif task == "mrpc":
                ctx = (f"Sentence 1: {r['sentence1']}\nSentence 2: {r['sentence2']}\nQuestion: Do both "
                       "sentences mean the same thing?\nAnswer:")
                ch = [" no", " yes"]
            elif task == "qqp":
                ctx = (f"Question 1: {r['question1']}\nQuestion 2: {r['question2']}\nQuestion: Do both "
                       "questions ask the same thing?\nAnswer:")
                ch = [" no", " yes"]
            elif task == "mnli":
                hyp = r["hypothesis"].strip()
                hyp = hyp if hyp.endswith(".") else hyp + "."
                ctx = f"{r['premise']}\nQuestion: {hyp} True, False or Neither?\nAnswer:"
                ch = [" True", " Neither", " False"]
            elif task == "qnli":
                ctx = f"{r['question']}\n{r['sentence']}\nQuestion: Does this response answer the question?\nAnswer:"
                ch = [" yes", " no"]
            elif task == "rte":
                ctx, ch = f"{r['sentence1']}\nQuestion: {r['sentence2']} True or False?\nAnswer:", [" True", " False"]
            elif task == "wnli":
                ctx, ch = f"{r['sentence1']}\nQuestion: {r['sentence2']} True or False?\nAnswer:", [" False", " True"]
            else:
                raise ValueError(f"unsupported GLUE task {task!r}")
            if label < 0:
                continue
            items.append({"id": f"{task}-{i}", "context": ctx, "choices": ch, "label": label})
        out[task] = items
    return out


def build_mathqa(n=1000, split="test", seed=0):
    """MathQA as ``choice`` items ("Question: <problem>\\nAnswer:" followed by
    one of the five options, as lm-evaluation-harness's mathqa)."""
    ds = hub_dataset(["allenai/math_qa", "math_qa"], None, split)
    items = []
    for i in subsample(len(ds), n, seed):
        r = ds[i]
        options = [c[4:].rstrip(" ,") for c in re.findall(r"[abcd] \) .*?, |e \) .*?$", r["options"])]
        if len(options) != 5 or r["correct"] not in "abcde":
            continue
        items.append({"id": f"mathqa-{i}", "context": f"Question: {r['Problem']}\nAnswer:",
                      "choices": [" " + o for o in options], "label": "abcde".index(r["correct"])})
    return items


def build_commonsense_qa(n=None, seed=0):
    """CommonsenseQA (validation) as ``choice`` items with answer letters."""
    ds = hub_dataset(["tau/commonsense_qa", "commonsense_qa"], None, "validation")
    items = []
    for i in subsample(len(ds), n, seed):
        r = ds[i]
        labels = list(r["choices"]["label"])
        if r["answerKey"] not in labels:
            continue
        text = f"Question: {r['question'].strip()}\n" + "".join(
            f"{lab}. {t}\n" for lab, t in zip(labels, r["choices"]["text"])) + "Answer:"
        items.append({"id": f"csqa-{i}", "context": text, "choices": [" " + lab for lab in labels],
                      "label": labels.index(r["answerKey"])})
    return items


def build_truthfulqa_mc1(n=None, seed=0):
    """TruthfulQA multiple choice (MC1, one true answer) as ``choice`` items
    ("Q: ...\\nA:" followed by each answer)."""
    ds = hub_dataset(["truthfulqa/truthful_qa", "truthful_qa"], "multiple_choice", "validation")
    items = []
    for i in subsample(len(ds), n, seed):
        r = ds[i]
        targets = r["mc1_targets"]
        items.append({"id": f"truthfulqa-{i}", "context": f"Q: {r['question']}\nA:",
                      "choices": [" " + c for c in targets["choices"]], "label": list(targets["labels"]).index(1)})
    return items


def build_cosmosqa(n=1000, seed=0, exclude_texts=()):
    """CosmosQA (validation) as ``choice`` items
    ("<context>\\nQuestion: <question>\\nAnswer:" followed by each answer),
    leaving out questions whose context appears in ``exclude_texts``."""
    ds = hub_dataset(["allenai/cosmos_qa", "cosmos_qa"], None, "validation")
    excluded = "\n".join(exclude_texts)
    items = []
    for i in subsample(len(ds), None, seed):
        r = ds[i]
        if r["context"].strip() and r["context"].strip()[:200] in excluded:
            continue
        items.append({"id": f"cosmosqa-{i}", "context": f"{r['context']}\nQuestion: {r['question']}\nAnswer:",
                      "choices": [" " + r[f"answer{k}"] for k in range(4)], "label": int(r["label"])})
    return [items[j] for j in subsample(len(items), n, seed)]


def build_xsum(n=200, seed=0, exclude_texts=(), max_document_chars=6000):
    """XSum (test) as ``rouge_l`` items: "Article: <document>\\n\\nSummarize the
    article above in one sentence.\\nSummary:" with the reference summary,
    leaving out articles that appear in ``exclude_texts``."""
    ds = hub_dataset(["EdinburghNLP/xsum", "xsum"], None, "test")
    excluded = "\n".join(exclude_texts)
    candidates = []
    for i in subsample(len(ds), None, seed):
        r = ds[i]
        doc = r["document"].strip()
        if not doc or doc[:200] in excluded:
            continue
        candidates.append((i, doc[:max_document_chars], r["summary"].strip()))
    chosen = [candidates[j] for j in subsample(len(candidates), n, seed)]
    return [{"id": f"xsum-{i}", "prompt": f"Article: {doc}\n\nSummarize the article above in one sentence.\nSummary:",
             "reference": summary} for i, doc, summary in chosen]


def build_wikitext2():
    """The WikiText-2 (raw) test set as one string, lines joined as the
    original agent-eval perplexity benchmark does (empty lines become " \\n")."""
    ds = hub_dataset(["Salesforce/wikitext", "wikitext"], "wikitext-2-raw-v1", "test")
    return "".join(" \n" if s == "" else s for s in ds["text"])


def save_reference_model(repo_id, out_dir, revision=None, tokenizer_fallback=None):
    """Downloads a model and its tokenizer from the hub and saves them in
    ``out_dir`` as a safetensors model folder (the evaluator never loads
    pickles, even trusted ones). ``tokenizer_fallback`` names a repository
    whose tokenizer is used when ``repo_id`` has none."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    kwargs = {"revision": revision} if revision else {}
    model = AutoModelForCausalLM.from_pretrained(repo_id, **kwargs)
    try:
        tokenizer = AutoTokenizer.from_pretrained(repo_id, **kwargs)
    except Exception:  # noqa: BLE001 - no tokenizer files in the repository
        if not tokenizer_fallback:
            raise
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_fallback)
    model.save_pretrained(out_dir)  # safetensors (the default since transformers 4.35)
    if not os.path.exists(os.path.join(out_dir, "model.safetensors")) and not os.path.exists(
            os.path.join(out_dir, "model.safetensors.index.json")):
        raise RuntimeError(f"{repo_id} was not saved as safetensors; upgrade transformers")
    tokenizer.save_pretrained(out_dir)
    gen = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)


def save_hub_config(repo_id, out_path, revision=None):
    """Copies a hub model's config.json to ``out_path``."""
    from huggingface_hub import hf_hub_download
    path = hf_hub_download(repo_id, "config.json", revision=revision)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    shutil.copyfile(path, out_path)


def _image_suffix(data):
    if data[:3] == b"\xff\xd8\xff":
        return ".jpg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return ".png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    return ".img"


def write_image_split(ds, out_dir, label_column, image_column="image", label_names=None):
    """Writes the images of a hub split as files (their original encoded
    bytes) into ``out_dir`` with ``labels.jsonl`` (``{"file", "label"}``;
    labels as integers, string labels mapped through ``label_names``).
    Returns the number of images."""
    import datasets
    ds = ds.cast_column(image_column, datasets.Image(decode=False))
    os.makedirs(out_dir, exist_ok=True)
    records = []
    for i in range(len(ds)):
        row = ds[i]
        img = row[image_column]
        data = img.get("bytes")
        if data is None and img.get("path"):
            with open(img["path"], "rb") as f:
                data = f.read()
        label = row[label_column]
        if label_names is not None and not isinstance(label, int):
            label = label_names.index(label)
        name = f"{i:06d}{_image_suffix(data)}"
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        records.append({"file": name, "label": int(label)})
    write_jsonl(os.path.join(out_dir, "labels.jsonl"), records)
    return len(records)
