"""Image classifiers submitted as TorchScript: the preprocessing they declare
(``preprocess.json``), batched inference over image files and the whole
evaluation. numpy, PIL and torch are imported inside the functions."""
from __future__ import annotations

import math
import os
import time

from mlrb_eval import Invalid
from mlrb_llm_env import offline_environment, peak_memory_bytes, pick_device, reset_peak_memory, set_determinism
from mlrb_llm_files import read_jsonl
from mlrb_llm_inspect import GiB, check_limits, read_workspace_json
from mlrb_llm_load import load_torchscript
from mlrb_llm_protocol import agent_code


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
