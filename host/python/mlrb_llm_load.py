"""Loading a checked model: a Hugging Face folder through a private folder
of links with transformers (no remote code, safetensors only, offline), or a
TorchScript module whose graph is checked for file and Python operators.
torch and transformers are imported inside the functions."""
from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile

import mlrb_eval
from mlrb_eval import Invalid
from mlrb_llm_env import offline_environment
from mlrb_llm_inspect import GiB, MODEL_FILES
from mlrb_llm_protocol import agent_code


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
    st = mlrb_eval.checked_lstat(path, name)
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
