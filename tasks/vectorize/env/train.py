"""The forward pass of a small convolutional layer, written with Python loops.

`forward` below computes, for a batch of images with channels last:

    a 2-D convolution (no padding, stride 1) with a bank of filters,
    plus a bias per filter, a ReLU, and a 2x2 max pooling with stride 2.

It is correct but slow. Make it as fast as possible without changing what it
returns (see data_description.txt for the exact rules of the game).

Run `python3 train.py` to check forward() against a copy of the original
(forward_loops, on a small batch) and to time it on a sample batch of the
shapes the evaluator times it on.
"""
import time

import numpy as np


def relu(x):
    return np.maximum(x, 0.0)


# ============================================================================
# The function to vectorise. The evaluator imports this module and calls
# forward(x, weights, bias); keep its name, its arguments and its result.
# ============================================================================
def forward(x, weights, bias):
    """Convolution + bias + ReLU + 2x2 max pooling.

    x        float64 array (N, H, W, C_in): a batch of N images of H x W pixels, C_in channels
    weights  float64 array (K, K, C_in, C_out): C_out filters of K x K pixels
    bias     float64 array (C_out,)
    returns  float64 array (N, (H - K + 1) // 2, (W - K + 1) // 2, C_out)

    out[b, i, j, f] = max over di, dj in {0, 1} of
        relu(bias[f] + sum over p, q, c of x[b, 2i+di+p, 2j+dj+q, c] * weights[p, q, c, f])
    (a last odd row or column of the convolution output is dropped by the pooling).
    """
    n, h, w, c_in = x.shape
    k, _, _, c_out = weights.shape
    h_conv, w_conv = h - k + 1, w - k + 1

    # Convolution: one dot product per image, output pixel and filter.
    conv = np.zeros((n, h_conv, w_conv, c_out))
    for b in range(n):
        for i in range(h_conv):
            for j in range(w_conv):
                window = x[b, i:i + k, j:j + k, :]
                for f in range(c_out):
                    conv[b, i, j, f] = np.sum(window * weights[:, :, :, f]) + bias[f]
    conv = relu(conv)

    # Max pooling over 2x2 blocks.
    h_pool, w_pool = h_conv // 2, w_conv // 2
    out = np.zeros((n, h_pool, w_pool, c_out))
    for b in range(n):
        for i in range(h_pool):
            for j in range(w_pool):
                for f in range(c_out):
                    out[b, i, j, f] = np.max(conv[b, 2 * i:2 * i + 2, 2 * j:2 * j + 2, f])
    return out


# ============================================================================
# Timing and checking; the evaluator does not run this part.
# ============================================================================
def sample_input(seed=0, n=16, h=32, w=32, c_in=3, c_out=16, k=3):
    """A random batch with the shapes the evaluator times forward() on."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, h, w, c_in))
    weights = rng.standard_normal((k, k, c_in, c_out)) / np.sqrt(k * k * c_in)
    bias = rng.standard_normal(c_out) * 0.1
    return x, weights, bias


def forward_loops(x, weights, bias):
    """A copy of the original forward(), kept unchanged to check a faster one."""
    n, h, w, c_in = x.shape
    k, _, _, c_out = weights.shape
    h_conv, w_conv = h - k + 1, w - k + 1
    conv = np.zeros((n, h_conv, w_conv, c_out))
    for b in range(n):
        for i in range(h_conv):
            for j in range(w_conv):
                window = x[b, i:i + k, j:j + k, :]
                for f in range(c_out):
                    conv[b, i, j, f] = np.sum(window * weights[:, :, :, f]) + bias[f]
    conv = relu(conv)
    h_pool, w_pool = h_conv // 2, w_conv // 2
    out = np.zeros((n, h_pool, w_pool, c_out))
    for b in range(n):
        for i in range(h_pool):
            for j in range(w_pool):
                for f in range(c_out):
                    out[b, i, j, f] = np.max(conv[b, 2 * i:2 * i + 2, 2 * j:2 * j + 2, f])
    return out


if __name__ == "__main__":
    # Correctness on small, odd shapes (the evaluator checks other shapes too).
    small = sample_input(seed=1, n=2, h=11, w=9, c_in=2, c_out=3, k=4)
    got, expected = forward(*small), forward_loops(*small)
    ok = got.shape == expected.shape and np.allclose(got, expected, rtol=1e-4, atol=1e-6)
    print(f"matches the original on a small batch: {ok}")

    # Speed on the sample batch.
    x, weights, bias = sample_input()
    start, cpu = time.perf_counter(), time.process_time()
    out = forward(x, weights, bias)
    elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    print(f"output shape {out.shape}, checksum {float(out.sum()):.6f}")
    print(f"forward() took {elapsed:.4f} s, {used:.4f} s of CPU (what the evaluator measures)")
