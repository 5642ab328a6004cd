"""XLNet against `transformers`: a randomly initialised `XLNetLMHeadModel` (every
parameter perturbed) saved with `save_pretrained` and read with our `from_pretrained`
gives the same last hidden state without memory, with the memory of a previous
segment, and with `perm_mask` / `target_mapping` (the query stream), and the same LM
logits; ours saved with `save_pretrained` loads in `transformers` with the same
outputs. The permutation LM predicts each target only from the tokens before it in
its sampled order (perturbation test); pre-training runs under `fit` and survives a
`.keras` round trip; bad arguments and checkpoints are named."""

import keras
import numpy as np
import pytest
import torch
from keras import ops

from keras_attn.errors import UserInputError
from keras_attn.models import XLNetBackbone, XLNetClassifier, XLNetPretrainer
from tests.helpers import max_abs_diff, to_numpy

# A few steps of a small model each, the traced steps being the family's and
# tests/training's: run eagerly (conftest.py's `eager`), about half the traced time.
pytestmark = pytest.mark.eager

BATCH, LENGTH, VOCABULARY = 2, 9, 60


def _config(**overrides):
    import transformers

    sizes = dict(vocab_size=VOCABULARY, d_model=32, n_layer=2, n_head=4, d_inner=64)
    return transformers.XLNetConfig(**{**sizes, **overrides})


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """`(XLNetLMHeadModel, its folder)`, every parameter moved off its initialisation."""
    import transformers

    torch.manual_seed(0)
    model = transformers.XLNetLMHeadModel(_config()).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    folder = tmp_path_factory.mktemp("xlnet")
    model.save_pretrained(folder)
    return model, folder


def _inputs(seed=0, padded=True):
    rng = np.random.default_rng(seed)
    padding = np.ones((BATCH, LENGTH), "int32")
    if padded:
        padding[1, 6:] = 0
    segments = np.array([[0, 0, 0, 0, 1, 1, 1, 1, 2]] * BATCH, "int32")  # XLNet's <cls>: 2
    ids = rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32") * padding
    return {"token_ids": ids, "segment_ids": segments, "padding_mask": padding}


def _theirs(model, inputs, mems=None, **kwargs):
    tensors = {name: torch.tensor(value) for name, value in kwargs.items()}
    with torch.no_grad():
        return model.transformer(
            torch.tensor(inputs["token_ids"]).long(),
            token_type_ids=torch.tensor(inputs["segment_ids"]).long(),
            attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.float32),
            use_mems=True,
            mems=mems,
            **tensors,
        )


def _orders(seed):
    """A `perm_mask` (1: may not see) and a `target_mapping` for 3 targets per row."""
    rng = np.random.default_rng(seed)
    blocked = (rng.random((BATCH, LENGTH, LENGTH)) < 0.4).astype("float32")
    mapping = np.zeros((BATCH, 3, LENGTH), "float32")
    for row in range(BATCH):
        mapping[row, np.arange(3), rng.choice(6, 3, replace=False)] = 1.0
    return blocked, mapping


def test_the_content_stream_equals_xlnet_model(reference):
    model, folder = reference
    backbone = XLNetBackbone.from_pretrained(folder)
    inputs = _inputs()
    theirs = _theirs(model, inputs).last_hidden_state.numpy()
    assert max_abs_diff(backbone(inputs)["sequence_output"], theirs) < 1e-5
    assert max_abs_diff(backbone.encode(inputs)["sequence_output"], theirs) < 1e-5


def test_memory_and_the_query_stream_equal_xlnet_model(reference):
    model, folder = reference
    backbone = XLNetBackbone.from_pretrained(folder)
    first, second = _inputs(1, padded=False), _inputs(2)
    theirs_first = _theirs(model, first)
    ours_first = backbone.encode(first)
    blocked, mapping = _orders(3)
    theirs = _theirs(
        model, second, mems=theirs_first.mems, perm_mask=blocked, target_mapping=mapping
    )
    ours = backbone.encode(
        second,
        memories=ours_first["memories"],
        permutation_mask=blocked == 0,
        target_mapping=mapping,
    )
    # Both keep every position (mem_len None): the memory and this segment, per layer.
    for mine, their in zip(ours["memories"], theirs.mems, strict=True):  # theirs: (len, batch, d)
        assert max_abs_diff(mine, np.swapaxes(their.numpy(), 0, 1)) < 1e-5
    assert max_abs_diff(ours["query_output"], theirs.last_hidden_state.numpy()) < 1e-5
    # The content stream with memory (no query stream: XLNet then returns it).
    content = _theirs(model, second, mems=theirs_first.mems).last_hidden_state.numpy()
    ours = backbone.encode(second, memories=ours_first["memories"])["sequence_output"]
    assert max_abs_diff(ours, content) < 1e-5


def test_the_lm_logits_equal_xlnet_lm_head_model(reference):
    model, folder = reference
    pretrainer = XLNetPretrainer.from_pretrained(folder)
    inputs = _inputs(4)
    blocked, mapping = _orders(5)
    with torch.no_grad():
        theirs = model(
            torch.tensor(inputs["token_ids"]).long(),
            token_type_ids=torch.tensor(inputs["segment_ids"]).long(),
            attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.float32),
            perm_mask=torch.tensor(blocked),
            target_mapping=torch.tensor(mapping),
        ).logits.numpy()
    ours = pretrainer.target_logits(inputs, blocked == 0, mapping)
    assert max_abs_diff(ours, theirs) < 1e-5


def test_the_classifier_equals_xlnet_for_sequence_classification(tmp_path):
    import transformers

    torch.manual_seed(1)
    model = transformers.XLNetForSequenceClassification(_config(num_labels=3)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    model.save_pretrained(tmp_path)
    classifier = XLNetClassifier.from_pretrained(tmp_path)
    inputs = _inputs(11)
    inputs["padding_mask"] = inputs["padding_mask"][:, ::-1].copy()  # XLNet pads on the left
    with torch.no_grad():
        theirs = model(
            torch.tensor(inputs["token_ids"]).long(),
            token_type_ids=torch.tensor(inputs["segment_ids"]).long(),
            attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.float32),
        ).logits.numpy()
    assert classifier.pooling == "last" and max_abs_diff(classifier(inputs), theirs) < 1e-5


def test_save_pretrained_loads_in_transformers(reference, tmp_path):
    import transformers

    _, folder = reference
    pretrainer = XLNetPretrainer.from_pretrained(folder)
    pretrainer.save_pretrained(tmp_path)
    model = transformers.XLNetLMHeadModel.from_pretrained(tmp_path).eval()
    inputs = _inputs(6)
    theirs = _theirs(model, inputs).last_hidden_state.numpy()
    assert max_abs_diff(pretrainer.backbone(inputs)["sequence_output"], theirs) < 1e-5


@pytest.mark.slow  # 5 s on the 2 busy cores: out of `make test-fast`
def test_each_target_sees_only_what_comes_before_it_in_its_order():
    backbone = XLNetBackbone(VOCABULARY, 2, 2, 32, 64, dropout=0.0)
    pretrainer = XLNetPretrainer(backbone, partial_prediction=2, seed=7)
    inputs = _inputs(8)
    order = pretrainer.sample_order(inputs)
    mapping, weights = to_numpy(order["target_mapping"]), to_numpy(order["target_weights"])
    visible = to_numpy(order["permutation_mask"])
    logits = to_numpy(pretrainer.target_logits(inputs, visible, mapping))
    real = inputs["padding_mask"].astype(bool)
    for row in range(BATCH):
        targets = [
            int(np.argmax(mapping[row, p])) for p in range(len(weights[row])) if weights[row, p]
        ]
        assert len(targets) == round(real[row].sum() / 2)
        for p, target in enumerate(targets):
            seen_by_target = 0
            for position in np.flatnonzero(real[row]):
                changed = {name: value.copy() for name, value in inputs.items()}
                changed["token_ids"][row, position] = (inputs["token_ids"][row, position] % 50) + 1
                new = to_numpy(pretrainer.target_logits(changed, visible, mapping))
                moved = np.abs(new[row, p] - logits[row, p]).max() > 1e-6
                earlier = position not in targets or targets.index(position) < p
                assert moved == earlier, (row, target, position)
                seen_by_target += moved
            assert seen_by_target == real[row].sum() - len(targets) + p  # context + earlier


def test_pretraining_fits_and_round_trips(tmp_path):
    backbone = XLNetBackbone(VOCABULARY, 2, 2, 32, 64)
    pretrainer = XLNetPretrainer(backbone, partial_prediction=3, seed=0)
    pretrainer.compile(optimizer=keras.optimizers.Adam(1e-2))
    inputs = _inputs(9)
    history = pretrainer.fit(inputs, epochs=3, batch_size=BATCH, verbose=0).history
    assert {"loss", "lm_loss", "accuracy"} <= set(history) and history["loss"][-1] < 5
    path = str(tmp_path / "pretrainer.keras")
    pretrainer.save(path)
    reloaded = keras.saving.load_model(path)
    blocked, mapping = _orders(10)
    assert (
        max_abs_diff(
            reloaded.target_logits(inputs, blocked == 0, mapping),
            pretrainer.target_logits(inputs, blocked == 0, mapping),
        )
        < 1e-6
    )
    sequence = reloaded.backbone.encode(inputs, memory_length=4)
    assert [tuple(ops.shape(m)) for m in sequence["memories"]] == [(BATCH, 4, 32)] * 2
    # Validation scores fixed orders: the same weights give the same validation loss.
    first, again = (pretrainer.evaluate(inputs, batch_size=BATCH, verbose=0) for _ in range(2))
    assert first == again
    fixed = to_numpy(pretrainer.sample_order(inputs, training=False)["target_mapping"])
    drawn = [to_numpy(pretrainer.sample_order(inputs)["target_mapping"]) for _ in range(2)]
    assert (fixed == to_numpy(pretrainer(inputs)["target_mapping"])).all()
    assert (drawn[0] != drawn[1]).any()


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"attn_type": "uni"}, "attn_type"),
        ({"bi_data": True}, "bi_data"),
        ({"untie_r": False}, "untie_r"),
    ],
)
def test_unsupported_checkpoints_are_named(tmp_path, overrides, match):
    import transformers

    transformers.XLNetModel(_config(**overrides)).save_pretrained(tmp_path)
    with pytest.raises(UserInputError, match=match):
        XLNetBackbone.from_pretrained(tmp_path)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="clamp_length"):
        XLNetBackbone(VOCABULARY, 1, 2, 32, 64, clamp_length=0)
    with pytest.raises(ValueError, match="divisible"):
        XLNetBackbone(VOCABULARY, 1, 3, 32, 64)
    backbone = XLNetBackbone(VOCABULARY, 1, 2, 32, 64)
    with pytest.raises(TypeError, match="XLNetBackbone"):
        XLNetPretrainer(object())
    with pytest.raises(ValueError, match="partial_prediction"):
        XLNetPretrainer(backbone, partial_prediction=0)
    with pytest.raises(ValueError, match="special_token_ids"):
        XLNetPretrainer(backbone, special_token_ids=[VOCABULARY])
    with pytest.raises(ValueError, match="pooling"):
        XLNetClassifier(backbone, 2, pooling="cls")
    with pytest.raises(TypeError, match="XLNetBackbone"):
        XLNetClassifier(object(), 2)
    with pytest.raises(ValueError, match="memories"):
        backbone.encode(_inputs(), memories=[np.zeros((BATCH, 2, 32), "float32")] * 2)
    with pytest.raises(ValueError, match="permutation_mask"):
        backbone.encode(_inputs(), permutation_mask=np.ones((BATCH, LENGTH, 3), bool))
    with pytest.raises(ValueError, match="target_mapping"):
        backbone.encode(_inputs(), target_mapping=np.ones((BATCH, LENGTH), "float32"))
