"""Attention over an image, one panel per generated word (Xu et al., 2015, figures 2-3)."""

import numpy as np

from keras_attn.api_export import keras_attn_export
from keras_attn.visualize.attention_heatmap import COLORMAP, save_figure


@keras_attn_export("keras_attn.visualize.attention_over_image")
def attention_over_image(image, weights, words, choices=None, title=None, path=None):
    """Draws where a captioning model looked for each word: the image, then one panel
    per word with the attention over the image's grid of regions laid on it.

    The grid of regions (a CNN's feature map, `rows x cols`) is stretched over the
    whole image, each region's weight drawn as a flat square (no smoothing, so the
    picture shows exactly what the model computed), on the colour scale of the
    largest weight of all panels. For hard attention, `choices` marks the region
    picked for each word with a red frame.

    Args:
        image: `(height, width)` grey values or `(height, width, 3)` RGB, any range
            (scaled to [0, 1] for drawing).
        weights: `(words, rows, cols)` attention over the regions, one map per word.
        words: the generated words, one per map.
        choices: `(words,)` the picked region of each word as a flat index
            `row * cols + col`, or None.
        title: a title over the panels.
        path: where to write the PNG (also returned as bytes).

    Returns:
        The PNG file's bytes.

    Example:

    >>> import numpy as np
    >>> from keras_attn.visualize import attention_over_image
    >>> image = np.zeros((8, 16))
    >>> weights = np.zeros((2, 2, 4)); weights[0, 0, 0] = weights[1, 1, 3] = 1.0
    >>> png = attention_over_image(image, weights, ["one", "two"], choices=[0, 7])
    >>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
    True
    """
    import matplotlib

    matplotlib.use("Agg")  # files, never a window
    import matplotlib.pyplot as plt

    image = np.asarray(image, dtype="float32")
    if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[-1] != 3):
        raise ValueError(
            "Expected `image` of shape (height, width) or (height, width, 3). Received: shape "
            f"{image.shape}"
        )
    weights = np.asarray(weights, dtype="float32")
    words = [str(word) for word in words]
    if weights.ndim != 3 or weights.shape[0] != len(words) or not words:
        raise ValueError(
            f"Expected `weights` of shape (words, rows, cols) with one map per word "
            f"({len(words)} words). Received: shape {weights.shape}"
        )
    if not np.all(np.isfinite(weights)):
        raise ValueError("Expected finite attention weights. Received: NaN or inf in `weights`")
    if choices is not None:
        choices = np.asarray(choices).reshape(-1)
        cells = weights.shape[1] * weights.shape[2]
        if len(choices) != len(words) or np.any((choices < 0) | (choices >= cells)):
            raise ValueError(
                f"Expected `choices`: one region index in [0, {cells}) per word "
                f"({len(words)}). Received: {choices.tolist()}"
            )
    span = float(image.max() - image.min()) or 1.0
    image = (image - image.min()) / span
    height, width = image.shape[:2]
    rows, cols = weights.shape[1:]
    vmax = float(weights.max()) or 1.0
    panel = 2.2 * width / max(height, width)
    figure, axes = plt.subplots(
        1, len(words) + 1, figsize=((panel + 0.2) * (len(words) + 1), 2.2 * height / width + 0.7)
    )
    extent = (0, width, height, 0)
    for index, axis in enumerate(axes):
        axis.imshow(image, cmap="gray", extent=extent, interpolation="nearest")
        axis.set_xticks([])
        axis.set_yticks([])
        if index == 0:
            axis.set_title("image", fontsize=9)
            continue
        step = index - 1
        axis.imshow(
            weights[step],
            cmap=COLORMAP,
            vmin=0.0,
            vmax=vmax,
            alpha=0.6,
            extent=extent,
            interpolation="nearest",
        )
        axis.set_title(words[step], fontsize=9)
        if choices is not None:
            row, col = divmod(int(choices[step]), cols)
            cell_h, cell_w = height / rows, width / cols
            axis.add_patch(
                matplotlib.patches.Rectangle(
                    (col * cell_w, row * cell_h), cell_w, cell_h, fill=False, color="red", lw=1.5
                )
            )
    scale = f"attention 0 to {vmax:.2f}"
    figure.suptitle(f"{title} ({scale})" if title else scale, fontsize=10)
    figure.tight_layout()
    return save_figure(figure, path)
