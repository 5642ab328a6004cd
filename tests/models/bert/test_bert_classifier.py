"""BertClassifier: trained end to end on sentence pairs; round trips; bad arguments."""

import keras
import numpy as np
import pytest

from keras_attn.data import WordPieceTokenizer
from keras_attn.models import BertBackbone, BertClassifier

WORDS = ["red", "green", "blue", "cat", "dog", "bird", "sun", "moon"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS


def _pairs(n, seed):
    """Sentence pairs labelled 1 when the second sentence mentions the sun."""
    rng = np.random.default_rng(seed)
    first, second, labels = [], [], rng.integers(0, 2, n)
    for label in labels:
        a = list(rng.choice(WORDS, 3))
        b = list(rng.choice([w for w in WORDS if w != "sun"], 3))
        if label:
            b[rng.integers(0, 3)] = "sun"
        first.append(" ".join(a))
        second.append(" ".join(b))
    return first, second, labels


def _model(**kwargs):
    backbone = BertBackbone(
        vocabulary_size=len(VOCAB),
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=16,
        dropout=0.0,
    )
    return BertClassifier(backbone, num_classes=2, **kwargs)


@pytest.mark.slow
def test_sentence_pair_classification_trains_end_to_end():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=12)
    first, second, labels = _pairs(3000, seed=0)
    x = {k: v.numpy() for k, v in tokenizer(first, second).items()}
    keras.utils.set_random_seed(0)
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(2e-3))
    model.fit(x, labels, batch_size=64, epochs=6, verbose=0)
    t_first, t_second, t_labels = _pairs(500, seed=1)
    test = {k: v.numpy() for k, v in tokenizer(t_first, t_second).items()}
    assert model.evaluate(test, t_labels, return_dict=True, verbose=0)["accuracy"] > 0.9


def test_save_load_round_trip(tmp_path):
    model = _model(dropout=0.2)
    x = {
        "token_ids": np.array([[2, 5, 6, 3, 7, 3, 0]]),
        "segment_ids": np.array([[0, 0, 0, 0, 1, 1, 0]]),
        "padding_mask": np.array([[1, 1, 1, 1, 1, 1, 0]]),
    }
    path = str(tmp_path / "classifier.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertClassifier) and restored.num_classes == 2
    np.testing.assert_allclose(restored(x), model(x), atol=1e-6)


def test_bad_arguments():
    backbone = _model().backbone
    with pytest.raises(ValueError, match="num_classes=1"):
        BertClassifier(backbone, num_classes=1)
    with pytest.raises(ValueError, match="dropout=1.0"):
        BertClassifier(backbone, num_classes=2, dropout=1.0)
    with pytest.raises(TypeError, match="Expected a BertBackbone"):
        BertClassifier(keras.layers.Dense(3), num_classes=2)


def test_mean_pooling_classifies_the_mean_of_real_tokens():
    model = _model(pooling="mean", dropout=0.0)
    assert model.get_config()["pooling"] == "mean"
    x = {
        "token_ids": np.array([[2, 5, 6, 3, 0, 0]]),
        "segment_ids": np.zeros((1, 6), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 0, 0]]),
    }
    sequence = np.asarray(model.backbone(x)["sequence_output"])[0, :4].mean(0)
    kernel, bias = (np.asarray(w) for w in model.get_layer("logits").weights)
    np.testing.assert_allclose(np.asarray(model(x))[0], sequence @ kernel + bias, atol=1e-5)
    with pytest.raises(ValueError, match="pooling='max'"):
        BertClassifier(model.backbone, num_classes=2, pooling="max")


def test_mean_pooling_trains_without_the_unused_pooler(recwarn):
    model = _model(pooling="mean", dropout=0.0)
    pooler = {id(w) for w in model.backbone.pooled_dense.weights}
    assert not pooler & {id(w) for w in model.trainable_variables}
    cls = _model()  # "cls" pooling trains it
    assert {id(w) for w in cls.backbone.pooled_dense.weights} <= {
        id(w) for w in cls.trainable_variables
    }
    before = [np.asarray(w) for w in model.backbone.pooled_dense.weights]
    x = {
        "token_ids": np.array([[2, 5, 6, 3], [2, 7, 3, 0]]),
        "segment_ids": np.zeros((2, 4), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [1, 1, 1, 0]]),
    }
    model.compile(optimizer="adam")
    model.fit(x, np.array([0, 1]), epochs=2, verbose=0)
    assert not [w for w in recwarn if "Gradients do not exist" in str(w.message)]
    for old, new in zip(before, model.backbone.pooled_dense.weights, strict=True):
        np.testing.assert_array_equal(old, np.asarray(new))


def test_save_pretrained_is_transformers_bert_for_sequence_classification(tmp_path):
    import torch
    import transformers

    model = _model()
    for weight in model.weights:  # no zero biases or unit norms hiding a swapped tensor
        weight.assign(np.random.default_rng(len(weight.path)).normal(0, 0.2, weight.shape))
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=16)
    folder = model.save_pretrained(tmp_path / "hf", tokenizer=tokenizer, labels=["no", "sun"])
    reference = transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
    assert type(reference).__name__ == "BertForSequenceClassification"
    assert reference.config.id2label == {0: "no", 1: "sun"}
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    first, second, _ = _pairs(4, seed=3)
    encoded = hf_tokenizer(first, second, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = reference(**encoded).logits.numpy()
    ours = tokenizer(np.array(first), np.array(second))
    length = encoded["input_ids"].shape[1]
    np.testing.assert_array_equal(ours["token_ids"][:, :length], encoded["input_ids"].numpy())
    got = model({k: v[:, :length] for k, v in ours.items()})
    np.testing.assert_allclose(keras.ops.convert_to_numpy(got), expected, atol=1e-5)
    with pytest.raises(ValueError, match="pooling='cls'.*Received: pooling='mean'"):
        _model(pooling="mean").save_pretrained(tmp_path / "mean")
    with pytest.raises(ValueError, match="name the 2 classes"):
        model.save_pretrained(tmp_path / "labels", labels=["one"])
