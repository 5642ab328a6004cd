"""The Show, Attend and Tell example's data and measurements (its training runs in
`test_examples.py` with `--smoke`)."""

import importlib.util
import pathlib

import keras
import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "show_attend_tell.py"


@pytest.fixture(scope="module")
def sat():
    spec = importlib.util.spec_from_file_location("show_attend_tell", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_training_and_held_out_digits_are_different_images(sat):
    (train_images, train_labels), (test_images, _) = sat.digit_split()
    assert len(train_images) + len(test_images) == 1797
    seen = {image.tobytes() for image in train_images}
    # (scikit-learn's set has a handful of pixel-identical duplicates; the split is by image)
    assert sum(image.tobytes() in seen for image in test_images) <= 3
    assert set(train_labels) == set(range(10))


def test_captions_name_the_digits_left_to_right(sat):
    (images, labels), _ = sat.digit_split()
    pixels, captions, ink = sat.canvases(images, labels, 300, np.random.default_rng(0))
    assert pixels.shape == (300, sat.HEIGHT, sat.WIDTH) and pixels.max() <= 1.0
    for n in range(300):
        k = int(np.sum(captions[n] >= 3))
        assert 2 <= k <= sat.MAX_DIGITS and captions[n, k] == sat.END
        assert np.all(captions[n, k + 1 :] == sat.PAD)
        columns = [np.nonzero(ink[n, j].any(axis=0))[0] for j in range(k)]
        # Every digit's ink lies strictly right of the previous digit's, none overlaps.
        assert all(a.max() < b.min() for a, b in zip(columns, columns[1:], strict=False))
        assert not ink[n, k:].any() and ink[n, :k].sum(axis=0).max() <= 1
    # The k-th word names the digit whose ink is k-th from the left: some training
    # image of that label, put where the ink starts, is exactly that ink.
    for n in range(20):
        for j in range(int(np.sum(captions[n] >= 3))):
            assert captions[n, j] - 3 == label_of(images, labels, pixels[n], ink[n, j])


def label_of(images, labels, canvas, ink):
    rows, cols = np.nonzero(ink)
    found = set()
    for image, label in zip(images, labels, strict=True):
        r, c = np.nonzero(image)
        y, x = rows.min() - r.min(), cols.min() - c.min()
        if 0 <= y <= canvas.shape[0] - 8 and 0 <= x <= canvas.shape[1] - 8:
            patch = canvas[y : y + 8, x : x + 8]
            if np.array_equal(patch * (image > 0), image) and ink[
                y : y + 8, x : x + 8
            ].sum() == len(r):
                found.add(int(label))
    assert len(found) == 1, found
    return found.pop()


def test_ink_regions_marks_the_cells_holding_ink(sat):
    ink = np.zeros((sat.HEIGHT, sat.WIDTH), bool)
    ink[0, 0] = ink[5, 9] = True  # regions (0, 0) and (1, 2)
    regions = sat.ink_regions(ink)
    assert regions.shape == (sat.HEIGHT // sat.CELL, sat.WIDTH // sat.CELL)
    assert sorted(zip(*np.nonzero(regions), strict=True)) == [(0, 0), (1, 2)]


def test_the_measurements_of_a_perfect_and_a_half_right_captioner(sat):
    (images, labels), _ = sat.digit_split()
    pixels, captions, ink = sat.canvases(images, labels, 40, np.random.default_rng(0))
    regions = sat.ink_regions(ink).reshape(40, sat.MAX_DIGITS, -1)
    first = regions.argmax(axis=-1)  # (canvases, MAX_DIGITS)

    class Model:
        def __init__(self, share, wrong):
            self.share, self.wrong, self.start = share, wrong, 0

        def caption(self, batch):
            rows = np.arange(self.start, self.start + len(batch))
            self.start += len(batch)
            words = captions[rows].copy()
            wrong = rows < self.wrong  # the first canvases' first word
            words[wrong, 0] = np.where(words[wrong, 0] == 3, 4, 3)
            attention = np.zeros((len(rows), sat.MAX_DIGITS + 1, regions.shape[-1]), "float32")
            attention[..., -1] = 1.0 - self.share  # the rest on the last region
            for i, row in enumerate(rows):
                for j in range(sat.MAX_DIGITS):
                    attention[i, j, first[row, j]] += self.share
            choices = np.concatenate([first[rows], np.zeros((len(rows), 1), int)], axis=1)
            return words, {"attention": attention, "choices": choices}

    perfect, *_ = sat.evaluate(Model(1.0, 0), pixels, captions, ink, batch_size=16)
    assert set(perfect.pop("digit_accuracy_by_class").values()) == {1.0}
    assert perfect == {
        "exact_captions": 1.0,
        "digit_accuracy": 1.0,
        "soft_mass_on_digit": pytest.approx(1.0),
        "hard_choice_on_digit": 1.0,
    }
    # The last region holds ink of some digits: the mass there counts only for them.
    on_last = regions[..., -1][(captions >= 3)[:, : sat.MAX_DIGITS]]
    half, *_ = sat.evaluate(Model(0.5, 10), pixels, captions, ink, batch_size=16)
    digits = int(np.sum(captions >= 3))
    assert half["exact_captions"] == pytest.approx(30 / 40)
    assert half["digit_accuracy"] == pytest.approx((digits - 10) / digits)
    assert half["soft_mass_on_digit"] == pytest.approx(0.5 + 0.5 * on_last.mean(), abs=1e-6)
    # Each class loses the wrong first words of its own.
    first = captions[:10, 0] - 3
    for d, name in enumerate(sat.DIGITS):
        total = np.sum(captions[:, : sat.MAX_DIGITS] == d + 3)
        expected = 1 - np.sum(first == d) / total
        assert half["digit_accuracy_by_class"].get(name, 1.0) == pytest.approx(expected)


def test_the_soft_loss_is_caption_nll_plus_the_doubly_stochastic_penalty(sat):
    (images, labels), _ = sat.digit_split()
    keras.utils.set_random_seed(0)
    model = sat.ShowAttendTell("soft", filters=8, units=16, embedding_dim=8, attention_units=8)
    inputs, targets = next(sat.batches(images, labels, 4, seed=0))
    outputs = model(inputs)
    loss = float(model.compute_loss(inputs, targets, outputs))
    logits, alpha = (np.asarray(outputs[name]) for name in ("logits", "attention"))
    expected = 0.0
    for n in range(4):
        nll, coverage = 0.0, np.zeros(alpha.shape[-1])
        for t, word in enumerate(targets[n]):
            if word == sat.PAD:
                break
            z = logits[n, t] - logits[n, t].max()
            nll -= z[word] - np.log(np.exp(z).sum())
            coverage += alpha[n, t]
        expected += (nll + np.sum((1.0 - coverage) ** 2)) / 4
    assert loss == pytest.approx(expected, rel=1e-5)
