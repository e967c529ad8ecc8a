"""Checks on a submitted model before anything loads it: the model folder
(symbolic links, pickles, custom code, tokenizer files), the bounded headers
of its safetensors files, its config.json and weight format, and the limits
on measured quantities (:func:`check_limits`)."""
from __future__ import annotations

import json
import math
import os
import stat
import struct

import mlrb_eval
from mlrb_eval import Invalid, one_line


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
    files, ignored = _list_model_folder(path, name)
    config = _read_model_config(path, name, files)
    weights = _weight_files(path, name, files)
    weight_bytes = sum(files[w] for w in weights)
    if weight_bytes > max_weight_bytes:
        raise Invalid(f"{name} weights take {weight_bytes / GiB:.2f} GiB, more than the {max_weight_bytes / GiB:g} GiB allowed")
    dtype_elements, stored = _stored_elements(path, name, weights)
    tokenizer_files = _tokenizer_files(path, name, files, require_tokenizer)
    given = set(weights) | set(tokenizer_files) | {f for f in MODEL_FILES if f in files}
    ignored += sorted(f for f in files if f not in given)
    quantization = config.get("quantization_config")
    return {
        "path": path, "name": name, "config": config, "weights": weights,
        "weight_bytes": weight_bytes, "stored_elements": stored,
        "dtype_elements": dtype_elements, "quantization": quantization if quantization else None,
        "tokenizer_files": tokenizer_files, "ignored": sorted(ignored),
    }


def _list_model_folder(path, name):
    """The regular files of a model folder (``{name: size}``) and the names of
    the other entries. A symbolic link where transformers would read a file
    raises :class:`Invalid`; other links are only listed as ignored."""
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
    return files, ignored


def _read_model_config(path, name, files):
    """config.json of a model folder: present, without custom code, with a
    model_type."""
    if "config.json" not in files:
        if "adapter_config.json" in files:
            raise Invalid(f"{name} holds an adapter only; merge it into the base model and save the full model")
        raise Invalid(f"{name}config.json missing: save the model with save_pretrained()")
    config = read_workspace_json(os.path.join(path, "config.json"), f"{name}config.json")
    if "auto_map" in config:
        raise Invalid(f"{name}config.json needs custom code (auto_map); use an architecture built into transformers")
    if not isinstance(config.get("model_type"), str) or not config["model_type"]:
        raise Invalid(f"{name}config.json has no model_type")
    return config


def _weight_files(path, name, files):
    """The safetensors files transformers will read: those of
    model.safetensors.index.json, or model.safetensors. Pickled weights alone
    are refused."""
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
        return weights
    if "model.safetensors" in files:
        return ["model.safetensors"]
    pickles = sorted(f for f in files if f.endswith(PICKLE_SUFFIXES))
    if pickles:
        raise Invalid(f"{name} holds pickled weights ({pickles[0]}) but no model.safetensors; "
                      "pickles are never loaded: save with save_pretrained() (safetensors, the default since transformers 4.35)")
    raise Invalid(f"{name}model.safetensors missing: save the weights in safetensors format")


def _stored_elements(path, name, weights):
    """``({dtype: elements}, elements)`` of the tensors stored in ``weights``,
    from their headers."""
    dtype_elements = {}
    stored = 0
    for w in weights:
        for dtype, _shape, numel in read_safetensors_header(os.path.join(path, w), f"{name}{w}").values():
            dtype_elements[dtype] = dtype_elements.get(dtype, 0) + numel
            stored += numel
    return dtype_elements, stored


def _tokenizer_files(path, name, files, require_tokenizer):
    """The tokenizer files of a model folder, size-capped and without custom
    code; with ``require_tokenizer`` at least one vocabulary file."""
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
    return tokenizer_files


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
