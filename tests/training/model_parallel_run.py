"""Every family on one device and under `ModelParallel` on a `(2, 4)` mesh of host devices.

Usage: XLA_FLAGS=--xla_force_host_platform_device_count=8 KERAS_BACKEND=jax \
    python -m tests.training.model_parallel_run [FAMILY ...]

For each family's task model: the predictions, and the weights after 5 `fit` steps
(Adam, batch 8), on one device and sharded, as their largest absolute difference; and
which of the variables `get_layout_map` splits came out split on the model axis.
Prints one JSON line. The device count must be set before JAX starts, hence a process.
"""

import json
import sys

import keras
import numpy as np

from keras_attn.models import (
    BertBackbone,
    BertClassifier,
    DebertaV3Backbone,
    DebertaV3Classifier,
    ElmoBiLM,
    GPTLanguageModel,
    RobertaBackbone,
    TransformerSeq2Seq,
    TransformerXL,
    XLNetBackbone,
    XLNetClassifier,
    model_structure,
)
from keras_attn.models.layout_maps import REPLICATED, sharding_roles

VOCABULARY, BATCH, LENGTH, STEPS = 64, 8, 8, 5
SIZE = dict(num_layers=2, num_heads=4, hidden_dim=32, intermediate_dim=64, dropout=0.0)


def _ids(shape, seed):
    return np.random.default_rng(seed).integers(4, VOCABULARY, shape).astype("int32")


def _encoder_data():
    x = {
        "token_ids": _ids((BATCH, LENGTH), 0),
        "segment_ids": np.zeros((BATCH, LENGTH), "int32"),
        "padding_mask": np.ones((BATCH, LENGTH), "int32"),
    }
    x["padding_mask"][1::2, 5:] = 0
    return x, np.arange(BATCH) % 3


def _lm_data():
    ids = _ids((BATCH, LENGTH + 1), 1)
    return ids[:, :-1], ids[:, 1:]


def _elmo_data():
    x = {"token_ids": _ids((BATCH, LENGTH), 4), "padding_mask": np.ones((BATCH, LENGTH), "int32")}
    x["padding_mask"][1::2, 5:] = 0
    x["token_ids"] *= x["padding_mask"]
    return x, {k: np.asarray(v) for k, v in ElmoBiLM.language_model_targets(x["token_ids"]).items()}


def _seq2seq_data():
    target = _ids((BATCH, LENGTH), 2)
    x = {"encoder_token_ids": _ids((BATCH, 6), 3), "decoder_token_ids": target[:, :-1]}
    return x, target[:, 1:]


FAMILIES = {
    "bert": (
        lambda: BertClassifier(BertBackbone(VOCABULARY, **SIZE, max_sequence_length=LENGTH), 3),
        _encoder_data,
    ),
    "roberta": (
        lambda: BertClassifier(RobertaBackbone(VOCABULARY, **SIZE, max_sequence_length=16), 3),
        _encoder_data,
    ),
    "deberta": (
        lambda: DebertaV3Classifier(
            DebertaV3Backbone(VOCABULARY, **SIZE, max_sequence_length=16, position_buckets=4),
            3,
        ),
        _encoder_data,
    ),
    "xlnet": (lambda: XLNetClassifier(XLNetBackbone(VOCABULARY, **SIZE), 3), _encoder_data),
    "gpt": (lambda: GPTLanguageModel(VOCABULARY, **SIZE, max_sequence_length=LENGTH), _lm_data),
    "transformer_xl": (
        lambda: TransformerXL(VOCABULARY, **SIZE, segment_length=4, memory_length=4),
        _lm_data,
    ),
    "seq2seq": (
        lambda: TransformerSeq2Seq(VOCABULARY, **SIZE, max_sequence_length=LENGTH),
        _seq2seq_data,
    ),
    # LSTMs: their cells stay whole (read at every step); projections and softmax split.
    "elmo": (
        lambda: ElmoBiLM(VOCABULARY, num_layers=2, hidden_dim=32, projection_dim=16, dropout=0.0),
        _elmo_data,
    ),
}


def _run(make, data, distribution=None):
    """Predictions, then weights after `STEPS` steps, and the model."""
    keras.utils.set_random_seed(0)
    x, y = data()
    model = make()
    predicted = model.predict(x, batch_size=BATCH, verbose=0)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.fit(x, y, batch_size=BATCH, epochs=STEPS, shuffle=False, verbose=0)
    return keras.tree.map_structure(np.asarray, predicted), model.get_weights(), model


def _largest_difference(a, b):
    pairs = zip(keras.tree.flatten(a), keras.tree.flatten(b), strict=True)
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in pairs)


def compare(name, mesh):
    make, data = FAMILIES[name]
    single = _run(make, data)
    layouts = model_structure(make).get_layout_map(mesh)
    distribution = keras.distribution.ModelParallel(layout_map=layouts, batch_dim_name="batch")
    with distribution.scope():
        sharded = _run(make, data)
    model = sharded[2]
    split = [v for v, role, _, _ in sharding_roles(model) if role != REPLICATED]
    return {
        "predictions": _largest_difference(single[0], sharded[0]),
        "weights": _largest_difference(single[1], sharded[1]),
        "split": len(split),
        "not_on_model_axis": [v.path for v in split if "model" not in tuple(v.value.sharding.spec)],
        "in_layout_map": len(layouts),
    }


def main(names):
    import jax

    devices = jax.devices()
    mesh = keras.distribution.DeviceMesh((2, 4), ["batch", "model"], devices)
    found = {name: compare(name, mesh) for name in names or FAMILIES}
    print(json.dumps({"devices": len(devices), "families": found}))


if __name__ == "__main__":
    main(sys.argv[1:])
