"""The shared checks every model family passes, on every backend, and tiny models.

`run_backbone_test(make, inputs, ...)`: config round trip, eager call and output
shapes, every layer's hidden states, masks (padding never reaches a real position, or a
later token never reaches an earlier one), a mixed-precision dtype policy, a training
step (every trainable weight gets a gradient, one SGD step lowers the loss), `.keras`
round trip. `run_task_test(make, x, y)`: the task's own `compile()` defaults, `fit`
lowers its loss, and the reloaded `.keras` file predicts the same. `make(**overrides)`
builds a fresh model (seeded, so each call gives the same weights); `TINY` holds one
`make` and its inputs per family.
"""

import keras
import numpy as np

from keras_attn.models import (
    BertBackbone,
    BertClassifier,
    GemmaLanguageModel,
    GPTLanguageModel,
    LlamaLanguageModel,
    TransformerSeq2Seq,
    TransformerXL,
    XLNetBackbone,
    XLNetClassifier,
)
from tests.helpers import gradients, max_abs_diff, to_numpy

VOCABULARY = 40
SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, dropout=0.0)


def _ids(shape, seed=0):
    return np.random.default_rng(seed).integers(4, VOCABULARY, shape).astype("int32")


def encoder_inputs(batch=2, length=8):
    """Token ids, two segments and a second row padded after 5 tokens."""
    return {
        "token_ids": _ids((batch, length)),
        "segment_ids": np.repeat([[0] * (length // 2) + [1] * (length - length // 2)], batch, 0),
        "padding_mask": np.array([[1] * length] + [[1] * 5 + [0] * (length - 5)] * (batch - 1)),
    }


def seeded(build):
    """`make(**overrides)`: `build(**overrides)` after seeding Keras (equal weights)."""

    def make(**overrides):
        keras.utils.set_random_seed(0)
        return build(**overrides)

    return make


tiny_bert = seeded(lambda **o: BertBackbone(VOCABULARY, **{**SIZE, "max_sequence_length": 8, **o}))
tiny_xlnet = seeded(lambda **o: XLNetBackbone(VOCABULARY, **{**SIZE, **o}))
tiny_gpt = seeded(
    lambda **o: GPTLanguageModel(VOCABULARY, **{**SIZE, "max_sequence_length": 8, **o})
)
tiny_llama = seeded(
    lambda **o: LlamaLanguageModel(
        VOCABULARY, **{**SIZE, "num_heads": 4, "num_key_value_heads": 2, "window": 3, **o}
    )
)
tiny_gemma = seeded(
    lambda **o: GemmaLanguageModel(
        VOCABULARY,
        **{**SIZE, "head_dim": 8, "window": 3, "global_every": 2, "num_key_value_heads": 1, **o},
    )
)
tiny_transformer_xl = seeded(
    lambda **o: TransformerXL(VOCABULARY, **{**SIZE, "segment_length": 4, "memory_length": 4, **o})
)
tiny_seq2seq = seeded(
    lambda **o: TransformerSeq2Seq(VOCABULARY, **{**SIZE, "max_sequence_length": 8, **o})
)


def _task(task_cls, backbone_make, **task_kwargs):
    def build(dtype=None, **overrides):
        backbone = backbone_make(**({} if dtype is None else {"dtype": dtype}), **overrides)
        return task_cls(backbone, **task_kwargs)

    return seeded(build)


tiny_bert_classifier = _task(BertClassifier, tiny_bert, num_classes=3)
tiny_xlnet_classifier = _task(XLNetClassifier, tiny_xlnet, num_classes=3)


def _main_output(outputs, key):
    return outputs[key] if key is not None else outputs


def run_backbone_test(
    make, inputs, expected_shapes, tmp_path, mask=None, output_key=None, no_gradient=()
):
    """The checks every family's backbone (or language model) passes.

    Args:
        make: `make(**overrides)`, a fresh seeded model.
        inputs: its call's input (an array or a dict of arrays).
        expected_shapes: output name -> shape (a dict output), or one shape.
        tmp_path: folder of the `.keras` round trip.
        mask: `"padding"` (positions where `inputs["padding_mask"]` is 0 never
            change a real position's output) or `"causal"` (a later token never
            changes an earlier position's), or `None`.
        output_key: the dict output the mask and dtype checks read.
        no_gradient: path suffixes of weights that get no gradient by the
            mathematics (a term multiplied by a zero-initialised weight, a weight
            only another call path reads).
    """
    model = make()
    config = model.get_config()
    assert type(model).from_config(config).get_config() == config
    outputs = model(inputs)
    shapes = expected_shapes if isinstance(expected_shapes, dict) else {None: expected_shapes}
    for key, shape in shapes.items():
        assert tuple(_main_output(outputs, key).shape) == tuple(shape), key
    main = to_numpy(_main_output(outputs, output_key))
    assert np.all(np.isfinite(main))
    check_hidden_states(model, inputs, outputs)

    if mask == "padding":  # other ids at padded positions: real positions unchanged
        changed = dict(inputs)
        padded = inputs["padding_mask"] == 0
        changed["token_ids"] = np.where(
            padded, (inputs["token_ids"] + 7) % VOCABULARY, inputs["token_ids"]
        )
        again = to_numpy(_main_output(model(changed), output_key))
        real = inputs["padding_mask"] == 1
        assert np.max(np.abs(again[real] - main[real])) < 1e-5
    elif mask == "causal":  # another last token: earlier positions unchanged
        changed = inputs.copy()
        changed[:, -1] = (changed[:, -1] + 7) % VOCABULARY
        again = to_numpy(_main_output(model(changed), output_key))
        assert np.max(np.abs(again[:, :-1] - main[:, :-1])) < 1e-5
        assert np.max(np.abs(again[:, -1] - main[:, -1])) > 1e-6

    # Mixed precision: float32 variables, bfloat16 compute, finite outputs.
    mixed = make(dtype="mixed_bfloat16")
    mixed_out = _main_output(mixed(inputs), output_key)
    assert all(v.dtype == "float32" for v in mixed.weights)
    assert np.all(np.isfinite(to_numpy(mixed_out, "float32")))
    computed = {layer.compute_dtype for layer in mixed._flatten_layers(include_self=False)}
    assert "bfloat16" in computed

    # A training step: every trainable weight gets a gradient, one SGD step lowers the loss.
    def loss():
        outputs = model(inputs, training=True)
        terms = [keras.ops.mean(keras.ops.square(_main_output(outputs, k))) for k in shapes]
        return sum(terms[1:], terms[0])

    before = float(to_numpy(loss()))
    grads = gradients(loss, model.trainable_weights)
    missing = [
        w.path
        for w, g in zip(model.trainable_weights, grads, strict=True)
        if (g is None or not np.any(to_numpy(g))) and not w.path.endswith(tuple(no_gradient))
    ]
    assert not missing, f"no gradient reaches {missing}"
    grads = [
        keras.ops.zeros(w.shape) if g is None else g
        for w, g in zip(model.trainable_weights, grads, strict=True)
    ]
    keras.optimizers.SGD(0.01).apply(grads, model.trainable_weights)
    assert float(to_numpy(loss())) < before

    # .keras round trip: the same outputs.
    path = str(tmp_path / "model.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    for key in shapes:
        assert (
            max_abs_diff(_main_output(reloaded(inputs), key), _main_output(model(inputs), key))
            < 1e-6
        )
    return model


def check_hidden_states(model, inputs, outputs):
    """`hidden_states(inputs)`: `num_layers + 1` states per stack, the embeddings first;
    the last is what the model's output is made from (the sequence output itself, or
    the states its logits are read from)."""
    states = model.hidden_states(inputs)
    stacks = states if isinstance(states, dict) else {"hidden_states": states}
    for name, stack in stacks.items():
        layers = model.num_layers + getattr(model, "num_knowledge_layers", 0)  # ERNIE's K too
        assert len(stack) == layers + 1, name
        assert {tuple(state.shape)[-1] for state in stack} == {model.hidden_dim}, name
    last = stacks.get("decoder", stacks.get("hidden_states"))[-1]
    if isinstance(outputs, dict):
        expected, found = outputs["sequence_output"], last
    else:  # a language model: logits from the last state
        expected, found = outputs, model._logits(last)
    assert tuple(found.shape) == tuple(expected.shape)
    assert max_abs_diff(found, expected) <= 1e-5


def run_task_test(make, x, y, tmp_path, epochs=5):
    """A task model's own `compile()` defaults: `fit` lowers the loss, the `.keras`
    file reloads compiled and predicts the same (every output of a dict of them)."""
    model = make()
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    batch = len(next(iter(y.values())) if isinstance(y, dict) else y)
    history = model.fit(x, y, batch_size=batch, epochs=epochs, verbose=0).history
    assert np.all(np.isfinite(history["loss"])) and history["loss"][-1] < history["loss"][0]
    path = str(tmp_path / "task.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert reloaded.compiled
    again, predicted = reloaded.predict(x, verbose=0), model.predict(x, verbose=0)
    for key in predicted if isinstance(predicted, dict) else [None]:
        pair = (again, predicted) if key is None else (again[key], predicted[key])
        assert max_abs_diff(*pair) < 1e-6
    return model


def run_lora_test(make, inputs, tmp_path, output_key=None, other_architecture=None):
    """LoRA on a model: `enable_lora` leaves the outputs as they were (B starts at
    zero), a training step moves only adapters (and a task model's own head), the
    `.lora.h5` adapters load into a fresh model of the same base weights with equal
    outputs, `merged_copy` (and the saved `.keras`) equals the adapted model with no
    adapter variable, and adapters of another rank or architecture are refused."""
    import pytest

    model = make()
    before = to_numpy(_main_output(model(inputs), output_key))
    model.enable_lora(4)
    assert model.lora_rank == 4
    assert max_abs_diff(_main_output(model(inputs), output_key), before) == 0.0
    lora = {w.path for w in model.weights if "lora_kernel" in w.path}
    assert lora and all(path.rsplit("/", 2)[1] in ("query", "value") for path in lora)
    backbone = getattr(model, "backbone", model)
    frozen = {w.path for w in backbone.weights} - lora
    assert not frozen & {w.path for w in model.trainable_weights}

    # Against a random target: a layer-normalised output's mean square is constant.
    target = np.random.default_rng(1).normal(size=before.shape).astype("float32")

    def loss():
        output = _main_output(model(inputs), output_key)
        return keras.ops.mean(keras.ops.square(keras.ops.subtract(output, target)))

    saved = {id(w): to_numpy(w) for w in model.weights}
    weights = model.trainable_weights
    grads = gradients(loss, weights)
    grads = [
        keras.ops.zeros(w.shape) if g is None else g for w, g in zip(weights, grads, strict=True)
    ]
    keras.optimizers.SGD(0.5).apply(grads, weights)
    changed = {w.path for w in model.weights if not np.array_equal(to_numpy(w), saved[id(w)])}
    assert changed & lora and not changed & frozen, changed
    adapted = to_numpy(_main_output(model(inputs), output_key))
    assert max_abs_diff(adapted, before) > 1e-6

    path = tmp_path / "adapters.lora.h5"
    model.save_lora_weights(path)
    fresh = make()
    fresh.load_lora_weights(path)  # enables rank-4 LoRA on the same targets
    heads = {w.path: w for w in model.trainable_weights if w.path not in lora}
    for w in fresh.weights:  # a task model's head is the task's, not the adapters'
        if w.path in heads:
            w.assign(heads[w.path])
    assert max_abs_diff(_main_output(fresh(inputs), output_key), adapted) <= 1e-6

    merged = model.merged_copy()
    assert not [w.path for w in merged.weights if "lora" in w.path]
    assert merged.lora_rank is None and type(merged) is type(model)
    assert max_abs_diff(_main_output(merged(inputs), output_key), adapted) <= 1e-5
    model.save(tmp_path / "merged.keras")  # Keras saves the kernels merged
    reloaded = keras.saving.load_model(tmp_path / "merged.keras")
    assert reloaded.lora_rank is None
    assert max_abs_diff(_main_output(reloaded(inputs), output_key), adapted) <= 1e-5

    other_rank = make()
    other_rank.enable_lora(2)
    with pytest.raises(ValueError, match="rank-4 adapters; .* have rank 2"):
        other_rank.load_lora_weights(path)
    if other_architecture is not None:
        with pytest.raises(ValueError, match="made for another architecture"):
            other_architecture().load_lora_weights(path)
    return model
