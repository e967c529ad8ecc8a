"""Evaluate a submission of the mlrb `char-lm` task.

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Never imports or runs code from the workspace. It reads the weights that
train.py wrote, <workspace_dir>/model.npz (and the optional
<workspace_dir>/model.json), checks them against the model format of the
task (env/data_description.txt), counts the parameters (every element of
every array) against the budget, and computes with its own numpy
implementation the perplexity per character of the model on
<hidden_dir>/test.txt:

    perplexity = exp(mean over the characters c_t of the text of -ln p(c_t | c_{t-k} .. c_{t-1}))

where positions before the start of the text hold the newline character.

Prints as its last line of stdout one JSON object: {"score": <perplexity>}
for a valid model, or {"score": null, "error": "..."} for an invalid one.
Exits 0 in both cases; a non-zero exit means the evaluator itself failed.
"""
import io
import json
import math
import os
import zipfile

import numpy as np

import mlrb_eval
from mlrb_eval import Invalid

MAX_PARAMS = 50_000              # every element of every array counts
MAX_CONTEXT = 64                 # k
MAX_WIDTH = 4096                 # embedding and hidden widths
MAX_HIDDEN_LAYERS = 3
MAX_NPZ_BYTES = 4 * 1024 * 1024  # model.npz on disk
MAX_UNPACKED_BYTES = 4 * 1024 * 1024
MAX_JSON_BYTES = 4096
ACTIVATIONS = {"tanh": np.tanh, "relu": lambda z: np.maximum(z, 0.0)}
ALLOWED = ["embed"] + [f"{p}{i}" for i in range(1, MAX_HIDDEN_LAYERS + 1) for p in "Wb"] + ["Wout", "bout"]
MAX_CHUNK_ELEMENTS = 4_000_000   # bounds the activation matrices of one chunk of the text


def load_npz(raw):
    """{name: float64 array} from the bytes of model.npz; raises Invalid."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise Invalid("model.npz is not an .npz archive (write it with np.savez)")
    if len(infos) > len(ALLOWED):
        raise Invalid(f"model.npz holds {len(infos)} entries; the format has at most {len(ALLOWED)} arrays")
    names = [info.filename for info in infos]
    if len(set(names)) != len(names):
        raise Invalid("model.npz holds the same entry twice")
    if sum(info.file_size for info in infos) > MAX_UNPACKED_BYTES:
        raise Invalid(f"model.npz unpacks to more than {MAX_UNPACKED_BYTES // (1024 * 1024)} MB")
    arrays = {}
    for info in infos:
        name = info.filename[:-4] if info.filename.endswith(".npy") else None
        if name not in ALLOWED:
            raise Invalid(f"model.npz holds an unexpected entry {mlrb_eval.short(info.filename)}; "
                          f"allowed arrays: {', '.join(ALLOWED)}")
        try:
            # Read the header first: the declared shape must fit in the entry,
            # so that a lying header cannot make np.load allocate a huge array.
            with archive.open(info) as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    shape, _, dtype = np.lib.format.read_array_header_2_0(f)
                else:
                    raise Invalid(f"array {name}: unsupported .npy version {version}")
                if dtype.hasobject or dtype.kind != "f":
                    raise Invalid(f"array {name} has dtype {dtype}; the format needs floating point "
                                  "(float16, float32 or float64)")
                if math.prod(shape) * dtype.itemsize > info.file_size:
                    raise Invalid(f"array {name}: its header declares more data than the entry holds")
            with archive.open(info) as f:
                array = np.lib.format.read_array(f, allow_pickle=False)
        except Invalid:
            raise
        except Exception as e:  # any malformed entry: the file is hostile input
            raise Invalid(f"array {name} in model.npz cannot be read ({type(e).__name__})")
        arrays[name] = np.asarray(array, dtype=np.float64)
    return arrays


def read_config(workspace):
    path = os.path.join(workspace, "model.json")
    if not os.path.lexists(path):
        return {"activation": "tanh"}
    text = mlrb_eval.read_text(path, "model.json", MAX_JSON_BYTES)
    try:
        config = json.loads(text)
    except (ValueError, RecursionError):
        raise Invalid("model.json is not valid JSON")
    if not isinstance(config, dict):
        raise Invalid("model.json must hold a JSON object")
    unknown = sorted(set(config) - {"activation"})
    if unknown:
        raise Invalid(f"model.json has unknown key(s): {mlrb_eval.short(', '.join(map(str, unknown)), 80)}")
    activation = config.get("activation", "tanh")
    if activation not in ACTIVATIONS:
        raise Invalid(f"model.json: activation must be one of {', '.join(ACTIVATIONS)}, "
                      f"got {mlrb_eval.short(activation)}")
    return {"activation": activation}


def shape_str(array):
    return str(tuple(int(d) for d in array.shape))


def validate(arrays, vocab_size):
    """Checks the structure; returns (k, [(W, b), ...] hidden layers, (Wout, bout))."""
    for name in ["embed", "Wout", "bout"]:
        if name not in arrays:
            raise Invalid(f"model.npz lacks the array {name}")
    n_params = sum(a.size for a in arrays.values())
    if n_params > MAX_PARAMS:
        raise Invalid(f"the model has {n_params} parameters, over the budget of {MAX_PARAMS}")
    for name, a in arrays.items():
        if not np.all(np.isfinite(a)):
            raise Invalid(f"array {name} holds NaN or infinite values")

    embed = arrays["embed"]
    if embed.ndim != 2 or embed.shape[0] != vocab_size or not 1 <= embed.shape[1] <= MAX_WIDTH:
        raise Invalid(f"embed must have shape ({vocab_size}, E) with 1 <= E <= {MAX_WIDTH}, "
                      f"got {shape_str(embed)}")
    width = embed.shape[1]

    layers = []
    for i in range(1, MAX_HIDDEN_LAYERS + 1):
        w, b = arrays.get(f"W{i}"), arrays.get(f"b{i}")
        if w is None and b is None:
            break
        if w is None or b is None:
            raise Invalid(f"hidden layer {i} needs both W{i} and b{i}")
        layers.append((i, w, b))
    extra = [n for n in arrays if n[0] in "Wb" and n[1:].isdigit() and int(n[1:]) > len(layers)]
    if extra:
        raise Invalid(f"hidden layers must be numbered 1, 2, 3 without gaps; found {', '.join(sorted(extra))}")

    first = layers[0][1] if layers else arrays["Wout"]
    first_name = "W1" if layers else "Wout"
    if first.ndim != 2 or first.shape[0] % width != 0:
        raise Invalid(f"{first_name} must have k*E rows (E = {width}), got shape {shape_str(first)}")
    k = first.shape[0] // width
    if not 1 <= k <= MAX_CONTEXT:
        raise Invalid(f"context length k = {k} out of range 1-{MAX_CONTEXT}")

    rows = k * width
    for i, w, b in layers:
        if w.ndim != 2 or w.shape[0] != rows or not 1 <= w.shape[1] <= MAX_WIDTH:
            raise Invalid(f"W{i} must have shape ({rows}, H{i}) with 1 <= H{i} <= {MAX_WIDTH}, "
                          f"got {shape_str(w)}")
        if b.shape != (w.shape[1],):
            raise Invalid(f"b{i} must have shape ({w.shape[1]},), got {shape_str(b)}")
        rows = w.shape[1]
    w_out, b_out = arrays["Wout"], arrays["bout"]
    if w_out.shape != (rows, vocab_size):
        raise Invalid(f"Wout must have shape ({rows}, {vocab_size}), got {shape_str(w_out)}")
    if b_out.shape != (vocab_size,):
        raise Invalid(f"bout must have shape ({vocab_size},), got {shape_str(b_out)}")
    return k, [(w, b) for _, w, b in layers], (w_out, b_out)


def perplexity(embed, k, layers, output, activation, text_ids, pad_id):
    act = ACTIVATIONS[activation]
    widest = max([k * embed.shape[1], output[0].shape[1]] + [w.shape[1] for w, _ in layers])
    rows = max(64, min(4096, MAX_CHUNK_ELEMENTS // widest))
    w_out, b_out = output
    padded = np.concatenate([np.full(k, pad_id, dtype=np.int64), text_ids])
    contexts = np.lib.stride_tricks.sliding_window_view(padded[:-1], k)  # row t: ids t-k .. t-1
    total = 0.0
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for start in range(0, len(text_ids), rows):
            ctx = contexts[start:start + rows]
            target = text_ids[start:start + rows]
            h = embed[ctx].reshape(len(ctx), -1)
            for w, b in layers:
                h = act(h @ w + b)
            logits = h @ w_out + b_out
            top = logits.max(axis=1)
            lse = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
            total += float(np.sum(lse - logits[np.arange(len(ctx)), target]))
    mean_nll = total / len(text_ids)
    if not math.isfinite(mean_nll) or mean_nll > 700:
        raise Invalid("the model's log-likelihood of the test text is not finite")
    return math.exp(mean_nll)


def score(workspace, hidden):
    with open(os.path.join(hidden, "vocab.json"), encoding="utf-8") as f:
        chars = json.load(f)["chars"]
    with open(os.path.join(hidden, "test.txt"), encoding="utf-8", newline="") as f:
        text = f.read()
    index = {c: i for i, c in enumerate(chars)}
    text_ids = np.array([index[c] for c in text], dtype=np.int64)

    raw = mlrb_eval.read_file(os.path.join(workspace, "model.npz"), "model.npz", MAX_NPZ_BYTES)
    if not raw:
        raise Invalid("model.npz is empty")
    config = read_config(workspace)
    arrays = load_npz(raw)
    k, layers, output = validate(arrays, len(chars))
    return perplexity(arrays["embed"], k, layers, output, config["activation"], text_ids, index["\n"])


if __name__ == "__main__":
    mlrb_eval.main(score)
