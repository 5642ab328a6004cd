"""BertTokenClassifier: tagging trained end to end from a CoNLL file; round trip; bad arguments."""

import keras
import numpy as np
import pytest

from keras_attn.data import WordPieceTokenizer, read_conll, tagging_inputs
from keras_attn.models import BertBackbone, BertTokenClassifier

# "mr"/"ms" make the next word a person; "in" makes the next word a place. The same
# names appear in both roles, so the tag depends on context, and the plural "##s"
# pieces test that only first sub-tokens are scored.
NAMES = ["ann", "bob", "cat", "dan", "eve", "fay"]
FILLER = ["saw", "met", "the", "a", "big", "old", "dog"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "mr", "ms", "in", "##s"] + NAMES + FILLER
TAGS = ["O", "B-PER", "B-LOC"]


def _write_conll(path, n, seed, bad_line=False):
    rng = np.random.default_rng(seed)
    lines = ["-DOCSTART- O", ""]
    for _ in range(n):
        words, tags = [], []
        while len(words) < 8:
            kind = rng.integers(0, 3)
            name = rng.choice(NAMES) + ("s" if rng.random() < 0.3 else "")
            if kind == 0:
                words += [rng.choice(["mr", "ms"]), name]
                tags += ["O", "B-PER"]
            elif kind == 1:
                words += ["in", name]
                tags += ["O", "B-LOC"]
            else:
                words += [rng.choice(FILLER), name if rng.random() < 0.3 else rng.choice(FILLER)]
                tags += ["O", "O"]
        lines += [f"{w} {t}" for w, t in zip(words, tags, strict=True)] + [""]
    if bad_line:
        lines += ["ann B-PER", "lonely", ""]
    path.write_text("\n".join(lines))
    return path


def _model(**kwargs):
    backbone = BertBackbone(
        vocabulary_size=len(VOCAB),
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=24,
        dropout=0.0,
    )
    return BertTokenClassifier(backbone, num_classes=len(TAGS), **kwargs)


def _arrays(tokenizer, data):
    inputs = {k: v.numpy() for k, v in tagging_inputs(tokenizer, data.words, data.tags).items()}
    x = {k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    return x, inputs["labels"], inputs["sample_weight"], inputs["word_ids"]


@pytest.mark.slow
def test_tagging_trains_end_to_end_from_conll(tmp_path):
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=24)
    train = read_conll(_write_conll(tmp_path / "train.txt", 1500, seed=0, bad_line=True), tags=TAGS)
    assert train.report.num_left_out == 1 and len(train) == 1500
    test = read_conll(_write_conll(tmp_path / "test.txt", 300, seed=1), tags=TAGS)
    x, labels, weights, _ = _arrays(tokenizer, train)
    # The loss sits on a plateau (~0.128, every word tagged O) until the model finds
    # the tagging rule; over seeds 0-7 it left it by epoch 4-7, except seed 0 (epoch
    # 11), so: seed 2 and 12 epochs, the margin this test needs not to be luck.
    keras.utils.set_random_seed(2)
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    model.fit(x, labels, sample_weight=weights, batch_size=32, epochs=12, verbose=0)

    # Word-level accuracy: the prediction at each word's first piece, mapped back via word_ids.
    x, labels, weights, word_ids = _arrays(tokenizer, test)
    predicted = np.argmax(model.predict(x, verbose=0), axis=-1)
    correct = total = 0
    for i, tags in enumerate(test.tags):
        first = {}
        for position, word in enumerate(word_ids[i]):
            first.setdefault(word, position)
        for word, tag in enumerate(tags):
            correct += predicted[i, first[word]] == tag
            total += 1
    assert total == sum(len(t) for t in test.tags)
    assert correct / total > 0.95


def test_save_load_round_trip(tmp_path):
    model = _model(dropout=0.2)
    x = {
        "token_ids": np.array([[2, 5, 9, 3, 0]]),
        "segment_ids": np.zeros((1, 5), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 0]]),
    }
    path = str(tmp_path / "tagger.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertTokenClassifier) and restored.num_classes == 3
    np.testing.assert_allclose(restored(x), model(x), atol=1e-6)


def test_bad_arguments():
    backbone = _model().backbone
    with pytest.raises(ValueError, match="num_classes=1"):
        BertTokenClassifier(backbone, num_classes=1)
    with pytest.raises(ValueError, match="dropout=-0.1"):
        BertTokenClassifier(backbone, num_classes=2, dropout=-0.1)
    with pytest.raises(TypeError, match="Expected a BertBackbone"):
        BertTokenClassifier(keras.layers.Dense(3), num_classes=2)
