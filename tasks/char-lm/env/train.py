"""Starter script for the char-lm task: a tiny character-level language model.

Trains, with numpy only, a small multilayer perceptron that predicts the next
character from the previous K characters, and writes its weights to
model.npz (and its activation function to model.json) in the format that
data_description.txt describes. Prints the perplexity per character on
data/valid.txt (the evaluator computes the same on a hidden test text).

Parameter budget: 50,000 numbers in model.npz, all arrays included.
"""
import json
import time

import numpy as np

SEED = 0
K = 3             # context: the previous K characters
E = 8             # embedding width per character
HIDDEN = [64]     # widths of the hidden layers (at most 3)
BATCH = 128
STEPS = 3000
LEARNING_RATE = 3e-3

chars = json.load(open("data/vocab.json", encoding="utf-8"))["chars"]
V = len(chars)
index = {c: i for i, c in enumerate(chars)}
PAD = index["\n"]  # positions before the start of a text hold a newline


def encode(path):
    with open(path, encoding="utf-8", newline="") as f:
        return np.array([index[c] for c in f.read()], dtype=np.int64)


def contexts(ids, k):
    """Row t holds the ids of the k characters before character t."""
    padded = np.concatenate([np.full(k, PAD, dtype=np.int64), ids])
    return np.lib.stride_tricks.sliding_window_view(padded[:-1], k)


def forward(params, ctx):
    """Returns the activations of every layer and the output logits."""
    hs = [params["embed"][ctx].reshape(len(ctx), -1)]
    for i in range(1, len(HIDDEN) + 1):
        hs.append(np.tanh(hs[-1] @ params[f"W{i}"] + params[f"b{i}"]))
    return hs, hs[-1] @ params["Wout"] + params["bout"]


def perplexity(params, ids):
    """exp(mean negative log-likelihood per character), as the evaluator computes it."""
    params = {n: a.astype(np.float64) for n, a in params.items()}
    ctx, total = contexts(ids, K), 0.0
    for s in range(0, len(ids), 4096):
        _, logits = forward(params, ctx[s:s + 4096])
        top = logits.max(axis=1)
        lse = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
        total += np.sum(lse - logits[np.arange(len(logits)), ids[s:s + 4096]])
    return float(np.exp(total / len(ids)))


def init(rng, train_ids):
    params = {"embed": rng.standard_normal((V, E)) * 0.3}
    width = K * E
    for i, h in enumerate(HIDDEN, start=1):
        params[f"W{i}"] = rng.standard_normal((width, h)) / np.sqrt(width)
        params[f"b{i}"] = np.zeros(h)
        width = h
    params["Wout"] = rng.standard_normal((width, V)) * 0.5 / np.sqrt(width)
    counts = np.bincount(train_ids, minlength=V) + 1.0
    params["bout"] = np.log(counts / counts.sum())  # start from the character frequencies
    return {n: a.astype(np.float32) for n, a in params.items()}


def gradients(params, ctx, targets):
    """Gradients of the mean cross-entropy (backpropagation by hand)."""
    n = len(ctx)
    hs, logits = forward(params, ctx)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    probs[np.arange(n), targets] -= 1.0
    d = probs / n                                        # d loss / d logits
    grads = {"Wout": hs[-1].T @ d, "bout": d.sum(axis=0)}
    dh = d @ params["Wout"].T
    for i in range(len(HIDDEN), 0, -1):
        dz = dh * (1.0 - hs[i] ** 2)                     # tanh'
        grads[f"W{i}"] = hs[i - 1].T @ dz
        grads[f"b{i}"] = dz.sum(axis=0)
        dh = dz @ params[f"W{i}"].T
    # Embedding: add the gradient of every context position to its character's row.
    dx, flat = dh.reshape(-1, E), ctx.ravel()
    grads["embed"] = np.stack([np.bincount(flat, weights=dx[:, j], minlength=V) for j in range(E)], axis=1)
    return {name: g.astype(np.float32) for name, g in grads.items()}


def train(train_ids):
    rng = np.random.default_rng(SEED)
    params = init(rng, train_ids)
    m = {n: np.zeros_like(a) for n, a in params.items()}
    v = {n: np.zeros_like(a) for n, a in params.items()}
    ctx = contexts(train_ids, K)
    for step in range(1, STEPS + 1):
        batch = rng.integers(0, len(train_ids), size=BATCH)
        grads = gradients(params, ctx[batch], train_ids[batch])
        lr = LEARNING_RATE * 0.5 * (1.0 + np.cos(np.pi * step / STEPS))  # cosine decay
        for name in params:                                             # Adam
            m[name] = 0.9 * m[name] + 0.1 * grads[name]
            v[name] = 0.999 * v[name] + 0.001 * grads[name] ** 2
            m_hat, v_hat = m[name] / (1 - 0.9 ** step), v[name] / (1 - 0.999 ** step)
            params[name] -= (lr * m_hat / (np.sqrt(v_hat) + 1e-8)).astype(np.float32)
    return params


start = time.time()
train_ids, valid_ids = encode("data/train.txt"), encode("data/valid.txt")
params = train(train_ids)
n_params = sum(a.size for a in params.values())
print(f"trained in {time.time() - start:.1f} s; {n_params} parameters (budget 50000)")
print(f"validation perplexity: {perplexity(params, valid_ids):.4f}")

np.savez("model.npz", **params)
with open("model.json", "w", encoding="utf-8") as f:
    json.dump({"activation": "tanh"}, f)
print("wrote model.npz and model.json")
