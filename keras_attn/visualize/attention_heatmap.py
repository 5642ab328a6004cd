"""Attention as pictures: heat maps per head (and per layer), as PNG files and in TensorBoard."""

import io

import numpy as np

from keras_attn.api_export import keras_attn_export

COLORMAP = "viridis"


def _as_grid(scores, tokens, key_tokens):
    """`scores` as a `(layers, heads, m, n)` float32 array, checked against the tokens."""
    scores = np.asarray(scores, dtype="float32")
    scores = (
        scores.reshape((1,) * (4 - scores.ndim) + scores.shape) if 2 <= scores.ndim <= 4 else scores
    )
    m, n = len(tokens), len(key_tokens)
    if scores.ndim != 4 or scores.shape[2:] != (m, n):
        raise ValueError(
            f"Expected `scores` of shape (layers, heads, {m}, {n}), (heads, {m}, {n}) or ({m}, "
            f"{n}) "
            f"for {m} query and {n} key tokens. Received: shape {np.shape(scores)}"
        )
    if m == 0 or n == 0:
        raise ValueError("Expected at least one token. Received: tokens=[] or key_tokens=[]")
    if not np.all(np.isfinite(scores)):
        raise ValueError(
            "Expected finite attention probabilities. Received: NaN or infinite values in `scores`"
        )
    return scores


def _font_families():
    """Matplotlib's default font, then a CJK font when one is installed (the package
    `cvttf-NotoSansCJK-Regular`), so Chinese and Japanese tokens draw as characters
    instead of empty boxes."""
    families = ["DejaVu Sans"]
    try:
        import cvttf_NotoSansCJK_Regular as cjk
    except ImportError:
        return families
    from matplotlib import font_manager

    path = cjk.get_TTF_path()
    if path not in {f.fname for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(path)
    return families + [font_manager.FontProperties(fname=path).get_name()]


@keras_attn_export("keras_attn.visualize.attention_heatmap")
def attention_heatmap(
    scores, tokens, title=None, path=None, cell_inches=0.28, row_titles=None, key_tokens=None
):
    """Renders attention probabilities as heat maps: one panel per head, one row per layer.

    Each panel has the query tokens down the side and the key tokens along the
    top, so row `i` shows where token `i` looks; rows sum to 1. The panels are
    `len(tokens)` x `len(key_tokens)` cells, laid out `layers` rows by `heads`
    columns. Padding should be cut off before (pass `scores[..., :n, :n]` and
    `tokens[:n]`).

    Args:
        scores: attention probabilities, `(layers, heads, queries, keys)`,
            `(heads, queries, keys)` or `(queries, keys)`.
        tokens: the query token strings (and the keys' for self-attention).
        title: a title over the panels (e.g. `"layer 2"`).
        path: where to write the PNG (also returned as bytes).
        cell_inches: the size of one cell; the figure grows with the tokens.
        row_titles: one label per layer row (default `"layer 0"`, ... when
            there is more than one row).
        key_tokens: the key token strings, for attention between two
            sequences (cross-attention: target tokens down the side, source
            tokens along the top); default: `tokens`.

    Colours run from 0 (dark purple) to the largest probability drawn (yellow;
    the value is in the title), matplotlib's "viridis", so the structure of
    near-uniform attention stays visible and every panel shares one scale.

    Returns:
        The PNG file's bytes.

    Example:

    >>> import numpy as np
    >>> from keras_attn.visualize import attention_heatmap
    >>> tokens = ["[CLS]", "hi", "[SEP]"]
    >>> png = attention_heatmap(np.full((2, 3, 3), 1 / 3), tokens, title="layer 0")
    >>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
    True
    >>> grid = attention_heatmap(np.full((2, 2, 3, 3), 1 / 3), tokens)  # 2 layers x 2 heads
    """
    import matplotlib

    matplotlib.use("Agg")  # files, never a window
    import matplotlib.pyplot as plt

    key_tokens = tokens if key_tokens is None else key_tokens
    scores = _as_grid(scores, tokens, key_tokens)
    layers, length, key_length = scores.shape[0], len(tokens), len(key_tokens)
    if row_titles is None:
        row_titles = [f"layer {layer}" for layer in range(layers)] if layers > 1 else [None]
    if len(row_titles) != layers:
        raise ValueError(
            f"Expected one row title per layer ({layers}). Received: {len(row_titles)} row_titles"
        )
    tokens, key_tokens = [str(t) for t in tokens], [str(t) for t in key_tokens]
    vmax = float(scores.max()) or 1.0
    width, height = max(2.5, cell_inches * key_length + 1.2), max(2.5, cell_inches * length + 1.2)
    with matplotlib.rc_context({"font.family": _font_families()}):
        return _draw(plt, scores, tokens, key_tokens, title, path, row_titles, vmax, width, height)


def _draw(plt, scores, tokens, key_tokens, title, path, row_titles, vmax, width, height):
    layers, heads, length, key_length = (
        scores.shape[0],
        scores.shape[1],
        len(tokens),
        len(key_tokens),
    )
    figure, axes = plt.subplots(
        layers, heads, figsize=(width * heads, (height + 0.4) * layers), squeeze=False
    )
    for layer in range(layers):
        for head in range(heads):
            axis = axes[layer, head]
            axis.imshow(
                scores[layer, head], cmap=COLORMAP, vmin=0.0, vmax=vmax, interpolation="nearest"
            )
            axis.set_xticks(range(key_length), key_tokens, rotation=90, fontsize=8)
            axis.set_yticks(range(length), tokens, fontsize=8)
            axis.xaxis.tick_top()
            axis.set_xlabel(f"head {head}", fontsize=10)
            if head == 0 and row_titles[layer]:
                axis.set_ylabel(row_titles[layer], fontsize=11)
    scale = f"colour scale 0 to {vmax:.2f}"
    figure.suptitle(f"{title} ({scale})" if title else scale, fontsize=11)
    figure.tight_layout()
    return save_figure(plt, figure, path)


def save_figure(plt, figure, path=None):
    """The figure as PNG bytes (written to `path` too when given); closes it."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    png = buffer.getvalue()
    if path is not None:
        with open(path, "wb") as f:
            f.write(png)
    return png


@keras_attn_export("keras_attn.visualize.attention_image_summary")
def attention_image_summary(name, scores, tokens, step=None, title=None, key_tokens=None):
    """Logs `attention_heatmap(scores, tokens)` as a TensorBoard image.

    Writes to the default summary writer (`with writer.as_default():`), under
    the IMAGES tab, with the tokens as the description.

    Args:
        name: the image's tag (e.g. `"layer_0"`).
        scores: attention probabilities, shaped as for `attention_heatmap`.
        tokens: the token strings.
        step: the step (default: the writer's default step).
        title: the picture's title.
        key_tokens: the key token strings, when they differ from `tokens`.

    Returns:
        True when it was written (a default writer was set), as `tf.summary.image`.

    Example:

    >>> import tempfile, numpy as np, tensorflow as tf
    >>> from keras_attn.visualize import attention_image_summary
    >>> with tf.summary.create_file_writer(tempfile.mkdtemp()).as_default():
    ...     written = attention_image_summary("layer_0", np.eye(3), ["a", "b", "c"], step=0)
    >>> bool(written)
    True
    """
    import tensorflow as tf

    png = attention_heatmap(scores, tokens, title=title, key_tokens=key_tokens)
    image = tf.io.decode_png(png, channels=3)[None]
    return tf.summary.image(name, image, step=step, description=" ".join(str(t) for t in tokens))
