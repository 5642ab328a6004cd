"""A LoRA model's export: the adapters merged into the kernels, the served outputs the
unmerged model's (<= 1e-5), no adapter variable in the SavedModel, the same variables
as a model trained without LoRA."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.export import export_saved_model, quantized_copy
from keras_attn.models import BertBackbone, BertClassifier, GPTLanguageModel
from tests.export.test_saved_model import (
    INPUTS,
    TEXTS,
    VOCABULARY,
    numpy_inputs,
    tf_only,
    tokenizer,
)

pytestmark = pytest.mark.slow


def _adapted(model, inputs, steps=3):
    """`model` with rank-4 LoRA whose adapters have moved (a few SGD steps)."""
    model.enable_lora(4)
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy")
    labels = np.arange(len(next(iter(inputs.values())))) % 2
    model.fit(inputs, labels, epochs=steps, verbose=0)
    return model


def _variable_names(path):
    return sorted(name for name, _ in tf.train.list_variables(str(path / "variables/variables")))


def test_the_served_graph_is_the_merged_model(tmp_path):
    def classifier():
        keras.utils.set_random_seed(0)
        backbone = BertBackbone.from_size(
            "tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=16
        )
        return BertClassifier(backbone, num_classes=2)

    x = numpy_inputs(tokenizer()(tf.constant(TEXTS)))
    model = _adapted(classifier(), x)
    plain = classifier()
    unmerged = model(x).numpy()
    assert np.abs(unmerged - plain(x).numpy()).max() > 1e-4  # the adapters matter
    path = export_saved_model(model, tokenizer(), tmp_path / "lora" / "1", warmup=False)
    served = tf_only(path, {"serve_token_ids": {k: x[k].tolist() for k in INPUTS}})
    np.testing.assert_allclose(served["serve_token_ids"]["logits"], unmerged, atol=1e-5)
    names = _variable_names(path)
    assert not [name for name in names if "lora" in name]
    plain_path = export_saved_model(plain, tokenizer(), tmp_path / "plain" / "1", warmup=False)
    assert len(names) == len(_variable_names(plain_path))
    assert model.lora_rank == 4  # the model itself keeps its adapters


def test_int8_and_generation_exports_merge_first(tmp_path):
    keras.utils.set_random_seed(0)
    lm = GPTLanguageModel(9, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                          max_sequence_length=8)  # fmt: skip
    ids = np.array([[5, 6, 7, 8], [6, 5, 8, 7]], "int32")
    lm.enable_lora(2)
    lm.compile(optimizer=keras.optimizers.SGD(0.5))
    lm.fit(ids[:, :-1], ids[:, 1:], epochs=3, verbose=0)
    small = quantized_copy(lm)
    assert small.lora_rank is None
    assert not [w.path for w in small.weights if "lora" in w.path]
    assert np.abs(np.asarray(small(ids)) - np.asarray(lm(ids))).max() < 0.05
    np.testing.assert_array_equal(
        lm.merged_copy().generate([[5, 6]], max_length=8), lm.generate([[5, 6]], max_length=8)
    )
