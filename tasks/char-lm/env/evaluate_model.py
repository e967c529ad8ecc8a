"""Scores a saved model the way the hidden evaluator does, on a text of yours.

Usage: python3 evaluate_model.py [model.npz] [data/valid.txt]

Reads model.npz (and model.json if present) in the format of
data_description.txt, checks the shapes and the parameter budget, and prints
the number of parameters and the perplexity per character on the text. The
hidden evaluator runs the same computation on a held-out test text (and
refuses malformed or over-budget models as invalid submissions).
"""
import json
import math
import os
import sys

import numpy as np

MAX_PARAMS = 50_000


def load(model_path):
    with np.load(model_path, allow_pickle=False) as npz:
        arrays = {name: np.asarray(npz[name], dtype=np.float64) for name in npz.files}
    config_path = os.path.join(os.path.dirname(model_path) or ".", "model.json")
    activation = "tanh"
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as f:
            activation = json.load(f).get("activation", "tanh")
    return arrays, activation


def structure(arrays, vocab_size):
    """Returns (k, hidden layers [(W, b)], (Wout, bout)); raises ValueError if malformed."""
    embed = arrays["embed"]
    layers = []
    while f"W{len(layers) + 1}" in arrays:
        i = len(layers) + 1
        layers.append((arrays[f"W{i}"], arrays[f"b{i}"]))
    first = layers[0][0] if layers else arrays["Wout"]
    k, rest = divmod(first.shape[0], embed.shape[1])
    if embed.shape[0] != vocab_size or rest or not 1 <= k <= 64 or len(layers) > 3:
        raise ValueError("embed must be (V, E), the first weight matrix (k*E, .), 1 <= k <= 64, <= 3 hidden layers")
    width = k * embed.shape[1]
    for w, b in layers:
        if w.shape[0] != width or b.shape != (w.shape[1],):
            raise ValueError(f"hidden layer shapes {w.shape}, {b.shape} do not chain")
        width = w.shape[1]
    if arrays["Wout"].shape != (width, vocab_size) or arrays["bout"].shape != (vocab_size,):
        raise ValueError(f"Wout must be ({width}, {vocab_size}) and bout ({vocab_size},)")
    return k, layers, (arrays["Wout"], arrays["bout"])


def perplexity(arrays, activation, ids, pad_id, vocab_size):
    k, layers, (w_out, b_out) = structure(arrays, vocab_size)
    act = np.tanh if activation == "tanh" else (lambda z: np.maximum(z, 0.0))
    padded = np.concatenate([np.full(k, pad_id, dtype=np.int64), ids])
    contexts = np.lib.stride_tricks.sliding_window_view(padded[:-1], k)
    total = 0.0
    for s in range(0, len(ids), 2048):
        h = arrays["embed"][contexts[s:s + 2048]].reshape(len(contexts[s:s + 2048]), -1)
        for w, b in layers:
            h = act(h @ w + b)
        logits = h @ w_out + b_out
        top = logits.max(axis=1)
        lse = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
        total += float(np.sum(lse - logits[np.arange(len(logits)), ids[s:s + 2048]]))
    return math.exp(total / len(ids)), k


def main():
    model_path = sys.argv[1] if len(sys.argv) > 1 else "model.npz"
    text_path = sys.argv[2] if len(sys.argv) > 2 else "data/valid.txt"
    with open("data/vocab.json", encoding="utf-8") as f:
        chars = json.load(f)["chars"]
    index = {c: i for i, c in enumerate(chars)}
    with open(text_path, encoding="utf-8", newline="") as f:
        ids = np.array([index[c] for c in f.read()], dtype=np.int64)
    arrays, activation = load(model_path)
    n_params = sum(a.size for a in arrays.values())
    ppl, k = perplexity(arrays, activation, ids, index["\n"], len(chars))
    over = "  OVER THE BUDGET: the evaluator refuses this model" if n_params > MAX_PARAMS else ""
    print(f"{n_params} parameters (budget {MAX_PARAMS}){over}; context k = {k}; activation {activation}")
    print(f"perplexity on {text_path}: {ppl:.4f}")


if __name__ == "__main__":
    main()
