"""BertPretrainer: tied masked-LM head at chosen positions, NSP/SOP head, summed losses."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import MaskedLMMasker
from keras_attn.models import BertBackbone, BertPretrainer

VOCAB, PAD, CLS, SEP, MASK = 64, 0, 1, 2, 3
FIRST_WORD = 4


def _counting_pairs(n, seed):
    """`[CLS] a a+1 .. [SEP] b b+1 .. [SEP]`: B continues A's count (label 1) half the
    time, else starts anywhere (label 0). Masked counts are predictable from neighbours."""
    rng = np.random.default_rng(seed)
    tokens = np.zeros((n, 16), "int32")
    labels = rng.integers(0, 2, n)
    for i in range(n):
        a_start, a_len, b_len = rng.integers(FIRST_WORD, 40), rng.integers(3, 7), rng.integers(3, 7)
        b_start = a_start + a_len if labels[i] else rng.integers(FIRST_WORD, 40)
        a = list(range(a_start, a_start + a_len))
        b = list(range(b_start, b_start + b_len))
        row = [CLS] + a + [SEP] + b + [SEP]
        tokens[i, : len(row)] = row
    segments = (np.cumsum(tokens == SEP, axis=1) - (tokens == SEP) >= 1).astype("int32") * (
        tokens != PAD
    )
    return tokens, segments, labels


def _dataset(n, seed, batch_size=32):
    tokens, segments, labels = _counting_pairs(n, seed)
    masker = MaskedLMMasker(VOCAB, MASK, [PAD, CLS, SEP, MASK], max_predictions_per_seq=3)

    def to_example(token_ids, segment_ids, label, masker_seed):
        masked = masker(token_ids, masker_seed)
        x = {
            "token_ids": masked["token_ids"],
            "segment_ids": segment_ids,
            "padding_mask": tf.cast(token_ids != PAD, tf.int32),
            "masked_positions": masked["masked_positions"],
        }
        y = {"mlm_logits": masked["masked_ids"], "nsp_logits": label}
        return x, y, {"mlm_logits": masked["masked_weights"], "nsp_logits": tf.ones([])}

    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    data = tf.data.Dataset.zip(
        tf.data.Dataset.from_tensor_slices((tokens, segments, labels)), seeds
    )
    return data.map(lambda t, s: to_example(*t, s)).batch(batch_size)


def _pretrainer(**kwargs):
    backbone = BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=2,
        num_heads=2,
        hidden_dim=64,
        intermediate_dim=128,
        max_sequence_length=16,
        dropout=0.0,
        **kwargs,
    )
    return BertPretrainer(backbone)


@pytest.mark.slow
def test_pretraining_learns_both_objectives():
    model = _pretrainer()
    model.compile(optimizer=keras.optimizers.Adam(2e-3))
    history = model.fit(_dataset(4096, seed=0), epochs=6, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    results = model.evaluate(_dataset(1024, seed=1), return_dict=True, verbose=0)
    assert results["mlm_logits_accuracy"] > 0.8, results
    assert results["nsp_logits_accuracy"] > 0.8, results


def test_masked_lm_logits_use_the_tied_embedding_at_masked_positions():
    model = _pretrainer()
    x, _, _ = next(iter(_dataset(4, seed=2)))
    logits = np.asarray(model(x)["mlm_logits"])
    head = model.masked_lm_head
    sequence = np.asarray(
        model.backbone({k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")})[
            "sequence_output"
        ]
    )
    gathered = np.take_along_axis(sequence, np.asarray(x["masked_positions"])[..., None], axis=1)
    transformed = np.asarray(head.layer_norm(head.dense(gathered)))
    expected = transformed @ np.asarray(model.backbone.token_embedding.embeddings).T + np.asarray(
        head.output_bias
    )
    np.testing.assert_allclose(logits, expected, atol=1e-4)
    # No output matrix of its own: the vocabulary projection is the backbone's table.
    assert sorted(w.path.split("/", 1)[1] for w in head.weights) == [
        "dense/bias",
        "dense/kernel",
        "layer_norm/beta",
        "layer_norm/gamma",
        "output_bias",
    ]
    assert len(model.weights) == len(model.backbone.weights) + len(head.weights) + 2


def test_factorised_embedding_and_sop_and_save_load(tmp_path):
    backbone = BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=2,
        num_heads=2,
        hidden_dim=64,
        intermediate_dim=128,
        max_sequence_length=16,
        embedding_dim=16,
        share_layers=True,
    )
    model = BertPretrainer(backbone, sentence_objective="sop")
    x, _, _ = next(iter(_dataset(4, seed=3)))
    outputs = model(x)
    assert set(outputs) == {"mlm_logits", "sop_logits"}
    path = str(tmp_path / "pretrainer.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    for key, value in outputs.items():
        np.testing.assert_allclose(restored(x)[key], value, atol=1e-6)
    # The tie survives reloading: changing the embedding changes the logits.
    restored.backbone.token_embedding.embeddings.assign(
        restored.backbone.token_embedding.embeddings * 2.0
    )
    assert not np.allclose(restored(x)["mlm_logits"], outputs["mlm_logits"])


def test_bad_arguments():
    with pytest.raises(ValueError, match="sentence_objective='mlm'"):
        BertPretrainer(_pretrainer().backbone, sentence_objective="mlm")  # it is "none"
    with pytest.raises(TypeError, match="Expected a BertBackbone"):
        BertPretrainer(keras.layers.Dense(2))


@pytest.mark.slow  # 5 s on the 2 busy cores: out of `make test-fast`
def test_masked_lm_alone_has_no_sentence_head_and_trains():
    backbone = _pretrainer().backbone
    model = BertPretrainer(backbone, sentence_objective="none")
    assert model.sentence_head is None
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    data = _dataset(64, seed=5).map(
        lambda x, y, w: (x, {"mlm_logits": y["mlm_logits"]}, {"mlm_logits": w["mlm_logits"]})
    )
    x, _, _ = next(iter(data))
    assert set(model(x)) == {"mlm_logits"}
    history = model.fit(data, epochs=2, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    assert set(history) == {"loss", "mlm_logits_accuracy"}
    pooler = {id(v) for v in backbone.pooled_dense.weights}
    assert not pooler & {id(v) for v in model.trainable_variables}  # nothing reads it
    restored = BertPretrainer.from_config(model.get_config())
    assert restored.sentence_objective == "none" and set(restored(x)) == {"mlm_logits"}
