"""The process an evaluator runs in: offline Hugging Face libraries,
deterministic seeds and kernels, the GPU it measures on and that GPU's peak
memory. torch and numpy are imported inside the functions."""
from __future__ import annotations

import os
import random
import tempfile


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
