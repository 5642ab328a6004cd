"""Classifiers on strings (issue 59, the text-classification kind): for every family's
tokenizer (WordPiece for BERT and XLNet, RoBERTa's byte-level BPE, DeBERTa-v3's
SentencePiece, GPT-1's packing), `fit` on strings trains exactly as `fit` on the same
batches tokenised by hand, `predict` on strings equals the token-id path, and the model
with its preprocessor survives a `.keras` file; the exported SavedModel serves the
same labels; the preprocessor's own contract and its mistakes."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import rotten_tomatoes
from keras_attn.data.string_datasets import preprocessed
from keras_attn.models import (
    BertClassifier,
    BertPretrainer,
    FeatureBasedTagger,
    GPTLanguageModel,
    Preprocessor,
    TextClassifier,
    TextClassifierPreprocessor,
    XLNetClassifier,
    registry,
)
from tests.models.conftest import LENGTH, SIZE, TRACED

# What a few steps compute on strings is this module's subject, the traced steps being
# tests/training's: its tests run eagerly (conftest.py's `eager`), in about half the time.
pytestmark = pytest.mark.eager  # byte-level BPE cases: `TRACED`

# `reviews`, `sources`, `tokenizers`, `tiny_preset`: tests/models/conftest.py


def _classifier(family, tokenizer):
    """A tiny classifier of `family` on `tokenizer`'s vocabulary (seeded)."""
    keras.utils.set_random_seed(0)
    vocabulary = tokenizer.vocabulary_size
    if family == "gpt":
        lm = GPTLanguageModel(vocabulary, **SIZE, max_sequence_length=LENGTH)
        return registry.family("gpt").head("classification", lm, 2)
    backbone_cls = registry.family(family).backbone_cls
    backbone = backbone_cls.from_size("tiny", vocabulary_size=vocabulary, **SIZE)
    return registry.family(family).head("classification", backbone, 2)


def _by_hand(tokenizer, family, texts, labels):
    """The batches a user built before preprocessors: the tokenizer's packing (and the
    family's classifier inputs, GPT-1's)."""
    x = tokenizer(tf.constant(texts))
    x = {k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    hook = registry.family(family).classification_batch
    if hook is not None:
        return hook(x, tf.constant(labels), tokenizer.pad_id)
    return x, labels


def _weights(model):
    return [np.array(w) for w in model.weights]


# XLNet's classifier reads BERT's packing from the same WordPiece tokenizer: the BERT
# case covers its preprocessor (and TextClassifier's test its class).
# About 12 s a case: BERT's in `make test-fast`, the other tokenizers in `make test`.
@pytest.mark.parametrize(
    "family",
    [
        "bert",
        pytest.param("roberta", marks=[pytest.mark.slow, TRACED]),
        *(pytest.param(f, marks=pytest.mark.slow) for f in ("deberta", "gpt")),
    ],
)
def test_strings_train_and_predict_as_the_same_batches_tokenised_by_hand(
    family, tokenizers, reviews, tmp_path
):
    texts, labels, _ = reviews
    tokenizer = tokenizers[family]
    preprocessor = TextClassifierPreprocessor(tokenizer)
    assert preprocessor.family == family
    ours, theirs = _classifier(family, tokenizer), _classifier(family, tokenizer)
    ours.preprocessor = preprocessor
    for model in (ours, theirs):
        # epsilon 1e-3: a key bias's gradient is zero but for rounding, which Adam's
        # default 1e-7 would blow up into steps that differ between the two graphs.
        model.compile(optimizer=keras.optimizers.Adam(1e-2, epsilon=1e-3))
    keras.utils.set_random_seed(1)
    ours.fit(texts, labels, batch_size=4, shuffle=False, verbose=0)  # 3 steps
    x, y = _by_hand(tokenizer, family, texts, labels)
    keras.utils.set_random_seed(1)
    theirs.fit(x, y, batch_size=4, shuffle=False, verbose=0)
    assert int(ours.optimizer.iterations) == int(theirs.optimizer.iterations) == 3
    moved = max(
        np.abs(a - b).max()
        for a, b in zip(_weights(ours), _weights(_classifier(family, tokenizer)), strict=True)
    )
    assert moved > 1e-3  # the steps trained
    # Within 1e-5, not bit for bit: where Grappler runs (as for a user; conftest.py
    # turns it off in tests) the two graphs' shapes (static here, not there) let it
    # fuse products with their biases differently; a step on other batches moves
    # weights by 1e-3 and more.
    for a, b in zip(_weights(ours), _weights(theirs), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    # Predicting strings equals the token-id path, after a `.keras` round trip.
    ours.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert type(loaded.preprocessor) is TextClassifierPreprocessor
    assert loaded.preprocessor.get_config() == preprocessor.get_config()
    predicted = loaded.predict(texts, batch_size=5, verbose=0)
    expected = theirs.predict(x, batch_size=5, verbose=0)
    keras.tree.map_structure(  # 1e-5: the two graphs' fusions, as for the weights
        lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), predicted, expected
    )


@pytest.mark.slow
def test_pairs_validation_and_datasets_of_strings(tokenizers, reviews, tmp_path):
    texts, labels, _ = reviews
    tokenizer = tokenizers["bert"]
    model = _classifier("bert", tokenizer)
    model.preprocessor = TextClassifierPreprocessor(tokenizer)
    model.compile(optimizer="adam")
    pairs = (texts, texts[::-1])
    history = model.fit(pairs, labels, batch_size=4, epochs=2, validation_split=0.25, verbose=0)
    assert len(history.history["val_loss"]) == 2  # 9 rows train, the last 3 validate
    by_hand = tokenizer(tf.constant(texts), tf.constant(texts[::-1]))
    x = {k: by_hand[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    np.testing.assert_allclose(
        model.predict(pairs, verbose=0), model.predict(x, verbose=0), atol=1e-6
    )
    dataset = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(4)
    model.fit(dataset, validation_data=(texts[:4], labels[:4]), verbose=0)
    loss, accuracy = model.evaluate(dataset, verbose=0)
    assert np.isfinite(loss) and 0 <= accuracy <= 1
    assert model.predict_on_batch(texts[:3]).shape == (3, 2)
    # Token ids still go straight to Keras, with or without a preprocessor.
    assert model.predict(x, verbose=0).shape == (12, 2)
    model.preprocessor = None  # then `export` is Keras's own: token ids in
    model.export(tmp_path / "keras_export", verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "keras_export"))  # kept: its variables
    np.testing.assert_allclose(loaded.serve(x).numpy(), model.predict(x, verbose=0), atol=1e-5)


def test_the_preprocessor_packs_one_string_a_batch_and_a_dict(tokenizers, tmp_path):
    preprocessor = TextClassifierPreprocessor(tokenizers["bert"])
    one = preprocessor("A fine film.")
    batch = preprocessor(["A fine film."])
    assert one["token_ids"].shape == (LENGTH,) and batch["token_ids"].shape == (1, LENGTH)
    np.testing.assert_array_equal(one["token_ids"], batch["token_ids"][0])
    as_dict = preprocessor({"text": ["A fine film."], "text_pair": ["Dull."]})
    as_tuple = preprocessor((["A fine film."], ["Dull."]))
    np.testing.assert_array_equal(as_dict["segment_ids"], as_tuple["segment_ids"])
    assert as_tuple["segment_ids"].numpy().max() == 1
    x, y, weights = preprocessor(["a"], [1], [0.5])
    assert (y, weights) == ([1], [0.5])
    rebuilt = TextClassifierPreprocessor.from_config(preprocessor.get_config())
    assert rebuilt.sequence_length == LENGTH and rebuilt.tokenizer is None
    # The base: a tokenizer, its family's files; assets written and read back.
    base = Preprocessor(tokenizers["roberta"])
    assert base.family == "roberta" and base.sequence_length == LENGTH
    folder = base.save_to_folder(tmp_path / "assets")
    assert sorted(p.name for p in folder.iterdir()) == ["merges.txt", "vocab.json"]
    back = Preprocessor.from_config(base.get_config())
    back.load_assets(folder)
    np.testing.assert_array_equal(
        back.tokenizer(["A fine film."])["token_ids"], base.tokenizer(["A fine film."])["token_ids"]
    )
    (folder / "merges.txt").unlink()
    with pytest.raises(ValueError, match="assets lack its tokenizer's files: \\['merges.txt'\\]"):
        Preprocessor.from_config(base.get_config()).load_assets(folder)


def test_preprocessor_and_string_data_mistakes_are_named(tokenizers, reviews):
    texts, labels, _ = reviews
    preprocessor = TextClassifierPreprocessor(tokenizers["bert"])
    with pytest.raises(TypeError, match="`x` to hold strings.*int32"):
        preprocessor(tf.constant([[1, 2]]))
    with pytest.raises(TypeError, match="string or a batch of strings.*list"):
        preprocessor([1, 2])
    with pytest.raises(ValueError, match="one or two segments.*a tuple of 3"):
        preprocessor((["a"], ["b"], ["c"]))
    with pytest.raises(ValueError, match="'text'.*Received keys: \\['txt'\\]"):
        preprocessor({"txt": ["a"]})
    with pytest.raises(TypeError, match="one of keras_attn's tokenizers.*str"):
        TextClassifierPreprocessor("vocab.txt")
    with pytest.raises(ValueError, match="model family in"):
        TextClassifierPreprocessor(tokenizers["bert"], family="nope")
    with pytest.raises(ValueError, match="has no tokenizer"):
        TextClassifierPreprocessor.from_config(preprocessor.get_config())(["a"])
    with pytest.raises(ValueError, match="of one length.*\\[11, 12\\]"):
        preprocessed(preprocessor, texts, labels[:11])
    with pytest.raises(ValueError, match="one string.*wrap it in a list"):
        preprocessed(preprocessor, "A fine film.")
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(4)
    with pytest.raises(ValueError, match="inside the dataset"):
        preprocessed(preprocessor, dataset, labels)
    with pytest.raises(ValueError, match="no `batch_size` with a tf.data.Dataset"):
        preprocessed(preprocessor, dataset, batch_size=4)
    model = _classifier("bert", tokenizers["bert"])
    model.preprocessor = preprocessor
    model.compile(optimizer="adam")
    with pytest.raises(ValueError, match="`validation_split` or `validation_data`, not both"):
        model.fit(texts, labels, validation_split=0.5, validation_data=(texts, labels))
    with pytest.raises(ValueError, match="cannot be split.*give `validation_data`"):
        model.fit(dataset, validation_split=0.5)
    with pytest.raises(ValueError, match="leaves no rows"):
        model.fit(texts[:1], labels[:1], validation_split=0.5)
    with pytest.raises(ValueError, match="has no preprocessor"):
        FeatureBasedTagger.preprocessor_for(tokenizers["bert"])


def test_empty_data_and_labels_outside_the_classes_are_named_before_the_graph(tokenizers, reviews):
    """The probe's cases: empty `x` (Keras's `KeyError: 'pop from an empty set'`), and
    labels the loss would fail on in the graph or truncate (>= num_classes, negative,
    NaN, strings, fractions), on strings and on token ids alike."""
    texts, labels, _ = reviews
    model = _classifier("bert", tokenizers["bert"])
    model.preprocessor = TextClassifierPreprocessor(tokenizers["bert"])
    model.compile(optimizer="adam")
    with pytest.raises(ValueError, match="at least one example in `x` for fit"):
        model.fit(x=[], y=[])
    with pytest.raises(ValueError, match="at least one example in `x` for predict"):
        model.predict([])
    with pytest.raises(ValueError, match="at least one example in `x` for evaluate"):
        model.evaluate(([], []), [])
    two = texts[:2]
    for bad, message in (
        ([0, 2], "class ids in \\[0, 2\\) in `y`. Received: 2 \\(label 1 of 2\\)"),
        ([-1, 0], "Received: -1 \\(label 0"),
        ([0, float("nan")], "Received: nan"),
        (np.array([0.0, 0.5]), "Received: 0.5"),
        (np.array([1, 7], "int64"), "Received: 7"),
    ):
        with pytest.raises(ValueError, match=message):
            model.fit(two, bad)
        with pytest.raises(ValueError, match=message):
            model.evaluate(two, bad)
    with pytest.raises(TypeError, match="integer class ids in `y` \\(0 to 1\\). Received: 'pos'"):
        model.fit(two, ["pos", "neg"])
    ids = {key: np.asarray(value) for key, value in model.preprocessor(two).items()}
    with pytest.raises(ValueError, match="Received: 3"):
        model.fit(ids, np.array([0, 3]))
    model.fit(two, np.array([1.0, 0.0]), verbose=0)  # whole numbers as floats: as ids
    # Soft targets under a loss that takes them are the user's choice: not checked.
    model.compile(optimizer="adam", loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    model.fit(two, np.array([[0.9, 0.1], [0.2, 0.8]]), verbose=0)


@pytest.mark.slow
def test_minilm_from_preset_fits_strings_and_serves_them(tmp_path):
    """keras-hub's first lines with our names: a preset's classifier, its preprocessor
    attached, trained on strings, exported with the tokenizer inside and served by
    TensorFlow alone with the labels `predict` gives."""
    model = BertClassifier.from_preset(
        "all_minilm_l6_v2", num_classes=2, pooling="mean", sequence_length=32
    )
    assert model.preprocessor.family == "bert" and model.preprocessor.sequence_length == 32
    assert model.preprocessor.tokenizer.lowercase  # MiniLM is uncased
    data = rotten_tomatoes(log=False)
    model.compile(optimizer=keras.optimizers.Adam(1e-4))
    model.fit(data.texts[:64], np.array(data.labels[:64]), batch_size=16, verbose=0)
    texts = data.texts[100:132]
    expected = np.argmax(model.predict(texts, verbose=0), axis=-1)
    path = model.export(tmp_path / "reviews" / "1", labels=["rotten", "fresh"], warmup=False)
    served = tf.saved_model.load(str(path)).signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_array_equal(served["label_ids"].numpy(), expected)
    with pytest.raises(TypeError, match="Expected a XLNetBackbone"):
        XLNetClassifier.from_preset("all_minilm_l6_v2", num_classes=2)


def test_the_generic_classifier_picks_the_presets_family(tiny_preset):
    """keras-hub's `TextClassifier.from_preset`: the family's classifier, preprocessor on."""
    model = TextClassifier.from_preset(tiny_preset, num_classes=3, sequence_length=LENGTH)
    assert type(model) is BertClassifier and isinstance(model, TextClassifier)
    assert model.num_classes == 3 and model.preprocessor.family == "bert"
    assert model.predict(["A fine film.", "Dull."], verbose=0).shape == (2, 3)
    # Compiled as keras-hub leaves its tasks: fit runs at once, Adam at 5e-5.
    assert np.isclose(float(model.optimizer.learning_rate), 5e-5)
    history = model.fit(["A fine film.", "Dull."], [2, 0], verbose=0)
    assert set(history.history) == {"loss", "accuracy"}
    assert not isinstance(model.backbone, TextClassifier)
    assert issubclass(XLNetClassifier, TextClassifier) and not issubclass(
        BertPretrainer, TextClassifier
    )
    with pytest.raises(TypeError, match="built from a preset"):
        TextClassifier()
    with pytest.raises(ValueError, match="registered preset.*Received: preset='nowhere'"):
        TextClassifier.from_preset("nowhere", num_classes=2)
