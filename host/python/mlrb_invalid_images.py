"""Shared operations for the ``scripts/invalid/<case>.py`` cases of the image
classifier tasks (budget_model_inference, budget_model_training, ...), whose
submission is ``model/model.pt`` (TorchScript) with ``model/preprocess.json``
and whose evaluator is :func:`mlrb_llm_eval.evaluate_image_classifier`.

A case runs with cwd = a copy of the finished workspace and PYTHONPATH =
/mlrb/lib (this folder), so it can ``import mlrb_invalid_images as I`` and turn
the starter's model into a submission the evaluator must refuse::

    \"\"\"The model reads a file of the evaluation machine (torch.from_file).

    expect: uses the operator aten::from_file
    \"\"\"
    import mlrb_invalid_images as I

    I.reads_files()

Every operation works on the CPU and needs only torch.
"""
import json
import os

MODEL = os.path.join("model", "model.pt")
SPEC = os.path.join("model", "preprocess.json")

__all__ = ["MODEL", "SPEC", "read_spec", "write_spec", "load_model", "save_scripted", "example_input",
           "num_classes", "pickle_model", "reads_files", "wrong_num_classes"]


def read_spec():
    """model/preprocess.json as a dict."""
    with open(SPEC, encoding="utf-8") as f:
        return json.load(f)


def write_spec(**changes):
    """Rewrites model/preprocess.json with ``changes`` (a value of None deletes the key)."""
    spec = read_spec()
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    with open(SPEC, "w", encoding="utf-8") as f:
        json.dump(spec, f, indent=1)


def load_model():
    """The submitted TorchScript module, on the CPU, in eval mode."""
    import torch
    return torch.jit.load(MODEL, map_location="cpu").eval()


def save_scripted(module):
    """Scripts ``module`` (an nn.Module, possibly holding the loaded
    ScriptModule) and saves it over model/model.pt."""
    import torch
    torch.jit.save(torch.jit.script(module.eval()), MODEL)


def example_input(batch=2):
    """A zero tensor shaped as the evaluator feeds the model (preprocess.json)."""
    import torch
    spec = read_spec()
    channels = 1 if spec.get("channels") == "L" else 3
    dtype = torch.float16 if spec.get("dtype") == "float16" else torch.float32
    size = int(spec["image_size"])
    return torch.zeros(batch, channels, size, size, dtype=dtype)


def num_classes():
    """The number of logits the submitted model returns."""
    import torch
    with torch.no_grad():
        out = load_model()(example_input().float())
    return int(out.shape[1])


def pickle_model():
    """Replaces model/model.pt by a pickle of the model's weights
    (``torch.save(state_dict)``, itself a zip archive) instead of TorchScript:
    torch.jit.load cannot read it, and the evaluator never unpickles."""
    import torch
    state = {k: v.clone() for k, v in load_model().state_dict().items()}
    torch.save(state, MODEL)


def reads_files(path="/etc/hostname"):
    """Wraps the model in a TorchScript module whose forward reads ``path``
    with torch.from_file (the operator aten::from_file) and mixes it into the
    logits: a model that touches files of the evaluation machine."""
    import torch

    class ReadsFiles(torch.nn.Module):
        def __init__(self, inner, path: str):
            super().__init__()
            self.inner = inner
            self.path = path

        def forward(self, x):
            data = torch.from_file(self.path, False, 1, dtype=torch.uint8)
            return self.inner(x) + data.float().sum() * 0.0

    save_scripted(ReadsFiles(load_model(), path))


def wrong_num_classes(n=None):
    """Wraps the model so that it returns ``n`` logits per image (default: one
    fewer than it has), not the task's number of classes."""
    import torch
    inner = load_model()
    n = num_classes() - 1 if n is None else n

    class Resized(torch.nn.Module):
        def __init__(self, inner, n: int):
            super().__init__()
            self.inner = inner
            self.n = n

        def forward(self, x):
            y = self.inner(x)
            reps = self.n // y.shape[1] + 1
            return y.repeat(1, reps)[:, :self.n]

    save_scripted(Resized(inner, n))
