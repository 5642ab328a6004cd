"""One layer's attention as a PNG: a heat map per head, side by side."""

import io

import numpy as np

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.visualize.attention_heatmap")
def attention_heatmap(scores, tokens, title=None, path=None, cell_inches=0.28):
    """Renders attention probabilities `(heads, queries, keys)` as heat maps, one per head.

    Each panel has the query tokens down the side and the key tokens along the
    top, so row `i` shows where token `i` looks; rows sum to 1. Padding should be
    cut off before (pass `scores[:, :n, :n]` and `tokens[:n]`).

    Args:
        scores: array `(heads, length, length)` (or `(length, length)`) of
            attention probabilities.
        tokens: the `length` token strings.
        title: a title over the panels (e.g. `"layer 2"`).
        path: where to write the PNG (also returned as bytes).
        cell_inches: the size of one cell; the figure grows with the tokens.

    Colours run from 0 to the largest probability drawn (shown in the title), so
    the structure of near-uniform attention stays visible.

    Returns:
        The PNG file's bytes.

    Example:

    >>> import numpy as np
    >>> from keras_attn.visualize import attention_heatmap
    >>> png = attention_heatmap(np.full((2, 3, 3), 1 / 3), ["[CLS]", "hi", "[SEP]"], title="layer 0")
    >>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
    True
    """
    import matplotlib

    matplotlib.use("Agg")  # files, never a window
    import matplotlib.pyplot as plt

    scores = np.asarray(scores, dtype="float32")
    if scores.ndim == 2:
        scores = scores[None]
    if scores.ndim != 3 or scores.shape[1:] != (len(tokens), len(tokens)):
        raise ValueError(f"Expected `scores` of shape (heads, {len(tokens)}, {len(tokens)}) for "
                         f"{len(tokens)} tokens. Received: shape {scores.shape}")
    heads, length = scores.shape[0], len(tokens)
    side = max(2.5, cell_inches * length + 1.2)
    figure, axes = plt.subplots(1, heads, figsize=(side * heads, side + 0.4), squeeze=False)
    for head, axis in enumerate(axes[0]):
        axis.imshow(scores[head], cmap="viridis", vmin=0.0, vmax=float(scores.max()), interpolation="nearest")
        axis.set_xticks(range(length), tokens, rotation=90, fontsize=8)
        axis.set_yticks(range(length), tokens, fontsize=8)
        axis.xaxis.tick_top()
        axis.set_xlabel(f"head {head}", fontsize=10)
    scale = f"colour scale 0 to {scores.max():.2f}"
    figure.suptitle(f"{title} ({scale})" if title else scale, fontsize=11)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    png = buffer.getvalue()
    if path is not None:
        with open(path, "wb") as f:
            f.write(png)
    return png
