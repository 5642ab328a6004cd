"""`attention_over_image`: one panel per word, each word's map where the model put it."""

import io

import numpy as np
import pytest

from keras_attn.visualize import attention_over_image


def decode(png):
    import matplotlib.image

    return matplotlib.image.imread(io.BytesIO(png))


def test_draws_a_panel_per_word_and_writes_the_file(tmp_path):
    weights = np.zeros((3, 2, 4))
    weights[0, 0, 0] = weights[1, 1, 1] = weights[2, 0, 3] = 1.0
    path = tmp_path / "attention.png"
    png = attention_over_image(np.random.rand(8, 16), weights, ["a", "b", "<end>"], path=path)
    assert path.read_bytes() == png
    wider = attention_over_image(np.random.rand(8, 16), weights[:1], ["a"])
    # Four panels (the image and three words) against two: about twice as wide.
    assert decode(png).shape[1] > 1.6 * decode(wider).shape[1]


def test_the_attended_region_is_where_the_colour_is():
    # One word, all of its attention on the right half of a black image: the right
    # half of the panel is brighter than the left.
    weights = np.array([[[0.0, 1.0]]])
    pixels = decode(attention_over_image(np.zeros((4, 8)), weights, ["w"]))
    panel = pixels[:, pixels.shape[1] // 2 :, :3]  # the word's panel
    rows = panel[panel.shape[0] // 3 : 2 * panel.shape[0] // 3]
    inside = rows[:, rows.shape[1] // 4 : 3 * rows.shape[1] // 4]
    left, right = np.split(inside, 2, axis=1)
    assert right.mean() > left.mean() + 0.1


@pytest.mark.parametrize(
    "image, weights, words, choices, message",
    [
        (np.zeros((2, 2, 2)), np.zeros((1, 1, 1)), ["a"], None, "`image`"),
        (np.zeros((2, 2)), np.zeros((2, 1, 1)), ["a"], None, "one map per word"),
        (np.zeros((2, 2)), np.zeros((1, 1)), ["a"], None, "`weights`"),
        (np.zeros((2, 2)), np.full((1, 1, 1), np.nan), ["a"], None, "finite"),
        (np.zeros((2, 2)), np.zeros((1, 1, 2)), ["a"], [2], "`choices`"),
    ],
)
def test_bad_arguments_are_named(image, weights, words, choices, message):
    with pytest.raises(ValueError, match=message):
        attention_over_image(image, weights, words, choices=choices)
