"""Attention as pictures: heat maps per head (and per layer), as PNG files and in TensorBoard."""

import io
import math

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


# The largest picture drawn, in inches at `save_figure`'s 100 dpi: 1600 x 1200 pixels,
# what a laptop screen shows whole. More tokens make smaller cells, not a larger file.
MAX_INCHES = (16.0, 12.0)


def _columns(heads):
    """Heads per row of one layer's grid: about 4:3, a divisor of `heads` when one is near
    (12 heads: 4 x 3; 16: 4 x 4; 8: 4 x 2; 2: 2 x 1)."""
    columns = min(heads, math.ceil(math.sqrt(heads * 4 / 3)))
    for candidate in (columns, columns - 1, columns + 1):
        if 1 <= candidate <= heads and heads % candidate == 0:
            return candidate
    return columns


@keras_attn_export("keras_attn.visualize.attention_figure")
def attention_figure(
    scores, tokens, title=None, cell_inches=0.28, row_titles=None, key_tokens=None
):
    """Attention probabilities as a matplotlib figure: a heat map per head, a colour bar.

    One layer `(heads, queries, keys)` is drawn as a grid of its heads (12 heads:
    4 x 3); several layers `(layers, heads, queries, keys)`, one row per layer. Each
    panel has the query tokens down its side and the key tokens along its top: row
    `i` shows where token `i` looks, and rows sum to 1. Cells are `cell_inches` wide
    while the figure stays within `MAX_INCHES` (16 x 12 inches, 1600 x 1200 px
    saved); beyond that the cells and their labels shrink. The caller closes it
    (`attention_heatmap` saves and closes it).

    Colours run from 0 (dark purple) to the largest probability drawn (yellow; the
    colour bar gives the scale), matplotlib's "viridis", so the structure of
    near-uniform attention stays visible and every panel shares one scale.

    Args:
        scores: attention probabilities, `(layers, heads, queries, keys)`,
            `(heads, queries, keys)` or `(queries, keys)`.
        tokens: the query token strings (and the keys' for self-attention).
        title: what the picture is of (e.g. `"layer 5: The cat sat."`).
        cell_inches: the largest size of one cell.
        row_titles: one label per layer row (default `"layer 0"`, ... when there is
            more than one layer).
        key_tokens: the key token strings, for attention between two sequences
            (cross-attention: target tokens down the side, source tokens along the
            top); default: `tokens`.

    Returns:
        The `matplotlib.figure.Figure`.

    Example:

    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from keras_attn.visualize import attention_figure
    >>> scores = np.full((12, 4, 4), 1 / 4)  # one layer's 12 heads: 4 x 3
    >>> figure = attention_figure(scores, ["[CLS]", "hi", "!", "[SEP]"], title="layer 5")
    >>> [axis.get_title() for axis in figure.axes[:2]]
    ['head 0', 'head 1']
    >>> plt.close(figure)
    """
    import matplotlib

    matplotlib.use("Agg")  # files, never a window
    import matplotlib.pyplot as plt

    key_tokens = tokens if key_tokens is None else key_tokens
    scores = _as_grid(scores, tokens, key_tokens)
    layers, heads = scores.shape[:2]
    if row_titles is None:
        row_titles = [f"layer {layer}" for layer in range(layers)] if layers > 1 else [None]
    if len(row_titles) != layers:
        raise ValueError(
            f"Expected one row title per layer ({layers}). Received: {len(row_titles)} row_titles"
        )
    if not (isinstance(cell_inches, (int, float)) and 0 < cell_inches <= 2):
        raise ValueError(f"Expected `cell_inches` in (0, 2]. Received: cell_inches={cell_inches!r}")
    tokens, key_tokens = [str(t) for t in tokens], [str(t) for t in key_tokens]
    rows, columns = (
        (layers, heads) if layers > 1 else (math.ceil(heads / _columns(heads)), _columns(heads))
    )
    with matplotlib.rc_context({"font.family": _font_families()}):
        return _draw(plt, scores, tokens, key_tokens, title, row_titles, rows, columns, cell_inches)


@keras_attn_export("keras_attn.visualize.attention_heatmap")
def attention_heatmap(
    scores, tokens, title=None, path=None, cell_inches=0.28, row_titles=None, key_tokens=None
):
    """Renders attention probabilities as a PNG: `attention_figure`, saved.

    Args:
        scores: attention probabilities, `(layers, heads, queries, keys)`,
            `(heads, queries, keys)` or `(queries, keys)`.
        tokens: the query token strings (and the keys' for self-attention).
        title: what the picture is of.
        path: where to write the PNG (also returned as bytes).
        cell_inches: the largest size of one cell (see `attention_figure`).
        row_titles: one label per layer row.
        key_tokens: the key token strings, when they differ from `tokens`.

    Returns:
        The PNG file's bytes, at most 1600 x 1200 pixels.

    Example:

    >>> import numpy as np
    >>> from keras_attn.visualize import attention_heatmap
    >>> tokens = ["[CLS]", "hi", "[SEP]"]
    >>> png = attention_heatmap(np.full((2, 3, 3), 1 / 3), tokens, title="layer 0")
    >>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
    True
    >>> grid = attention_heatmap(np.full((2, 2, 3, 3), 1 / 3), tokens)  # 2 layers x 2 heads
    """
    figure = attention_figure(scores, tokens, title, cell_inches, row_titles, key_tokens)
    return save_figure(figure, path)


def _draw(plt, scores, tokens, key_tokens, title, row_titles, rows, columns, cell_inches):
    layers, heads = scores.shape[:2]
    length, key_length = len(tokens), len(key_tokens)
    # Room for the labels: the longest token at 8 points (about 0.6 of a point's width a
    # character), the panel title, the colour bar and the figure's titles.
    label = max(len(t) for t in tokens + key_tokens) * 8 * 0.6 / 72 + 0.2
    width = columns * (cell_inches * key_length + label + 0.1) + 1.4
    height = rows * (cell_inches * length + label + 0.35) + 1.0
    scale = min(1.0, MAX_INCHES[0] / width, MAX_INCHES[1] / height)
    font = max(4.0, min(8.0, 8.0 * scale))
    figure, axes = plt.subplots(
        rows,
        columns,
        figsize=(max(3.0, width * scale), max(2.5, height * scale)),
        squeeze=False,
        layout="constrained",
    )
    vmax = float(scores.max()) or 1.0
    for index, axis in enumerate(axes.ravel()):
        layer, head = divmod(index, columns) if layers > 1 else (0, index)
        if head >= heads:  # the grid's last row is not full
            axis.set_axis_off()
            continue
        image = axis.imshow(
            scores[layer, head], cmap=COLORMAP, vmin=0.0, vmax=vmax, interpolation="nearest"
        )
        axis.set_xticks(range(key_length), key_tokens, rotation=90, fontsize=font)
        axis.set_yticks(range(length), tokens, fontsize=font)
        axis.xaxis.tick_top()
        axis.tick_params(length=0, pad=1)
        axis.set_title(f"head {head}", fontsize=font + 1, pad=2)
        if layers > 1 and head == 0 and row_titles[layer]:
            axis.set_ylabel(row_titles[layer], fontsize=font + 2)
    figure.colorbar(image, ax=axes, label="attention probability", shrink=0.6, pad=0.01)
    figure.supylabel("query: the token looking (row)", fontsize=font + 2)
    figure.supxlabel("key: the token looked at (column)", fontsize=font + 2)
    figure.suptitle(title or "attention", fontsize=font + 4)
    return figure


def save_figure(figure, path=None):
    """The figure as PNG bytes (written to `path` too when given); closes it."""
    import matplotlib.pyplot as plt

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
