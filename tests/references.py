"""Independent NumPy implementations of the papers' formulas, written loop by loop.

Nothing here calls keras_attn: these are the references our layers are checked
against when no third-party implementation (torch, Keras) has the same function.
"""

import numpy as np


def softmax(x, mask=None):
    """Softmax over the last axis; masked entries get probability 0 (all-masked: 0)."""
    x = np.asarray(x, "float64")
    if mask is None:
        mask = np.ones_like(x, bool)
    out = np.zeros_like(x)
    for index in np.ndindex(x.shape[:-1]):
        row, keep = x[index], mask[index]
        if keep.any():
            e = np.exp(row[keep] - row[keep].max())
            out[index][keep] = e / e.sum()
    return out


def dot(q, k):
    """Luong dot: q^T k for every (query, key) pair; q (Tq, d), k (Tk, d)."""
    return np.array([[float(np.sum(qi * kj)) for kj in k] for qi in q])


def scaled_dot(q, k):
    """Vaswani et al.: q^T k / sqrt(d_k)."""
    return dot(q, k) / np.sqrt(q.shape[-1])


def cosine(q, k, temperature):
    """temperature * q^T k / (|q| |k|)."""
    return np.array(
        [
            [temperature * float(qi @ kj) / (np.linalg.norm(qi) * np.linalg.norm(kj)) for kj in k]
            for qi in q
        ]
    )


def general(q, k, w):
    """Luong general: q^T W k."""
    return np.array([[float(qi @ w @ kj) for kj in k] for qi in q])


def additive(q, k, w_q, w_k, v):
    """Bahdanau: v^T tanh(W_q q + W_k k), with W_q (d_q, units), W_k (d_k, units)."""
    return np.array([[float(v @ np.tanh(qi @ w_q + kj @ w_k)) for kj in k] for qi in q])


def multi_head_attention(query, value, key, weights, head_score, mask=None):
    """`Concat(head_1..head_h) W^O`, `head_i = softmax(score_i(Q W_i^Q, K W_i^K)) V W_i^V`.

    Args:
        query, value, key: (batch, length, features) arrays.
        weights: dict with `query`, `key`, `value` kernels `(features, heads, dim)` and
            biases `(heads, dim)`, and `output` kernel `(heads, dim, out)`, bias `(out,)`.
        head_score: function `(h, q_h, k_h) -> (Tq, Tk)` scores of head h.
        mask: optional boolean (batch, Tq, Tk), True = may attend.

    Returns:
        (output (batch, Tq, out), probabilities (batch, heads, Tq, Tk)).
    """
    batch, heads = query.shape[0], weights["query_kernel"].shape[1]
    outputs, probabilities = [], []
    for b in range(batch):
        concat, probs_b = [], []
        for h in range(heads):
            q = query[b] @ weights["query_kernel"][:, h] + weights["query_bias"][h]
            k = key[b] @ weights["key_kernel"][:, h] + weights["key_bias"][h]
            v = value[b] @ weights["value_kernel"][:, h] + weights["value_bias"][h]
            p = softmax(head_score(h, q, k), None if mask is None else mask[b])
            probs_b.append(p)
            concat.append(p @ v)
        out = sum(concat[h] @ weights["output_kernel"][h] for h in range(heads))
        outputs.append(out + weights["output_bias"])
        probabilities.append(probs_b)
    return np.array(outputs), np.array(probabilities)


def sinusoidal_position_embedding(length, d_model, max_wavelength=10000):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))."""
    pe = np.zeros((length, d_model))
    for pos in range(length):
        for i in range(0, d_model, 2):
            pe[pos, i] = np.sin(pos / max_wavelength ** (i / d_model))
            if i + 1 < d_model:
                pe[pos, i + 1] = np.cos(pos / max_wavelength ** (i / d_model))
    return pe
