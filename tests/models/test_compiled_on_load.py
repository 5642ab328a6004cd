"""Every model with its own `compile()` comes back from a `.keras` file compiled: the
same loss and optimizer, the optimizer's state (step count, Adam's moments) as saved,
and no "`compile()` was not called as part of model loading" warning (Keras's default
for a custom `compile()` is to skip it and drop the optimizer)."""

import warnings

import keras
import numpy as np
import pytest

from keras_attn.models import (
    BertBackbone,
    BertClassifier,
    Distiller,
    ElectraPretrainer,
    GPTLanguageModel,
    TransformerSeq2Seq,
    TransformerXL,
    XLNetBackbone,
    XLNetPretrainer,
)

# What a reloaded model's compiled state computes is this module's subject, the traced
# steps being tests/training's: its tests run eagerly (conftest.py's `eager`).
pytestmark = pytest.mark.eager

VOCABULARY = 30
SIZE = dict(num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)


def _ids(shape, seed=0):
    return np.random.default_rng(seed).integers(4, VOCABULARY, shape).astype("int32")


def _encoder_inputs(batch=4, length=8):
    return {
        "token_ids": _ids((batch, length)),
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": np.ones((batch, length), "int32"),
    }


def _bert(**sizes):
    return BertBackbone(VOCABULARY, **{**SIZE, **sizes}, max_sequence_length=8, dropout=0.0)


def _gpt():
    ids = _ids((4, 9))
    model = GPTLanguageModel(VOCABULARY, max_length=8, **SIZE, dropout=0.0)
    return model, (ids[:, :-1], ids[:, 1:])


def _transformer_xl():
    ids = _ids((4, 9))
    model = TransformerXL(VOCABULARY, **SIZE, segment_length=4, memory_length=4, dropout=0.0)
    return model, (ids[:, :-1], ids[:, 1:])


def _seq2seq():
    ids = _ids((4, 7))
    model = TransformerSeq2Seq(VOCABULARY, **SIZE, dropout=0.0, max_sequence_length=8)
    x = {"encoder_token_ids": _ids((4, 6), seed=1), "decoder_token_ids": ids[:, :-1]}
    return model, (x, ids[:, 1:])


def _classifier():
    return BertClassifier(_bert(), 3, dropout=0.0), (_encoder_inputs(), np.array([0, 1, 2, 0]))


def _distiller():
    teacher = BertClassifier(_bert(num_layers=2), 3, dropout=0.0)
    student = BertClassifier(_bert(), 3, dropout=0.0)
    return Distiller(teacher, student), (_encoder_inputs(), np.array([0, 1, 2, 0]))


def _electra():
    generator = BertBackbone(VOCABULARY, 1, 2, 8, 16, max_sequence_length=8, embedding_dim=16)
    model = ElectraPretrainer(generator, _bert(), seed=0)
    x = _encoder_inputs()
    x["masked_positions"] = np.array([[1, 2]] * 4, "int32")
    x["masked_ids"] = x["token_ids"][:, 1:3].copy()
    x["masked_weights"] = np.ones((4, 2), "float32")
    x["token_ids"][:, 1:3] = 3
    return model, (x,)


def _xlnet():
    model = XLNetPretrainer(XLNetBackbone(VOCABULARY, 1, 2, 16, 32, dropout=0.0), seed=0)
    return model, (_encoder_inputs(),)


@pytest.mark.parametrize(
    "make",
    [_gpt, _transformer_xl, _seq2seq, _classifier, _distiller, _xlnet]
    + [pytest.param(_electra, marks=pytest.mark.slow)],  # 12 s: out of `make test-fast`
    ids=lambda make: make.__name__.strip("_"),
)
def test_a_saved_model_reloads_compiled_with_its_optimizer_state(make, tmp_path):
    keras.utils.set_random_seed(0)
    model, data = make()
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    model.fit(*data, batch_size=2, epochs=1, verbose=0)  # two steps
    path = str(tmp_path / "model.keras")
    model.save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        reloaded = keras.saving.load_model(path)
    assert reloaded.compiled and isinstance(reloaded.optimizer, keras.optimizers.Adam)
    assert int(reloaded.optimizer.iterations) == 2
    assert float(reloaded.optimizer.learning_rate) == pytest.approx(3e-3)
    assert type(reloaded.loss) is type(model.loss)
    saved = {v.path: np.asarray(v) for v in model.optimizer.variables}
    restored = {v.path: np.asarray(v) for v in reloaded.optimizer.variables}
    assert saved.keys() == restored.keys() and len(saved) > 2
    for name, value in saved.items():
        np.testing.assert_array_equal(restored[name], value, err_msg=name)
    history = reloaded.fit(*data, batch_size=2, epochs=1, verbose=0).history
    assert np.isfinite(history["loss"][-1])
    assert int(reloaded.optimizer.iterations) == 4
