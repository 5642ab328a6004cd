"""DeBERTa-v3 in and out of Hugging Face: random `transformers` `DebertaV2Model`s (v3's
settings and the variants the configuration allows; every weight perturbed, saved with
`save_pretrained`) load into `DebertaV3Backbone` with the same hidden states on the real
tokens, with padding; ours load back into `AutoModel`; the family runs on every
backend; what we cannot follow is named."""

import warnings

import keras
import numpy as np
import pytest
import torch

from keras_attn.errors import UserInputError
from keras_attn.models import (
    DebertaV3Backbone,
    DebertaV3Classifier,
    DebertaV3SpanQA,
    DebertaV3TokenClassifier,
    from_pretrained,
    registry,
)
from tests import model_harness as harness

VOCABULARY_SIZE, LENGTH = 60, 20  # longer than the exact distances: log buckets used

V3 = dict(
    relative_attention=True,
    position_buckets=8,
    pos_att_type="p2c|c2p",
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    position_biased_input=False,
    type_vocab_size=0,
    max_position_embeddings=64,
)
VARIANTS = {
    "v3": {},
    "separate-position-projections": dict(share_att_key=False),
    "c2p-only": dict(pos_att_type="c2p", share_att_key=False),
    "exact-distances-absolute-positions-segments": dict(
        position_buckets=-1,
        position_biased_input=True,
        type_vocab_size=2,
        max_position_embeddings=24,
    ),
    "factorised-embedding": dict(embedding_size=8),
}


def _config(**overrides):
    import transformers

    sizes = dict(
        vocab_size=VOCABULARY_SIZE,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=24,
    )
    return transformers.DebertaV2Config(**{**sizes, **V3, **overrides})


def perturbed(model, seed=0):
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model.eval()


def inputs(segments=False):
    rng = np.random.default_rng(0)
    token_ids = rng.integers(4, VOCABULARY_SIZE, (3, LENGTH)).astype("int32")
    padding_mask = np.ones((3, LENGTH), "int32")
    padding_mask[1, 13:] = padding_mask[2, 3:] = 0
    token_ids[padding_mask == 0] = 0
    segment_ids = np.zeros_like(token_ids)
    if segments:
        segment_ids[:, 10:] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def difference(ours, reference, x):
    with torch.no_grad():
        expected = reference(
            input_ids=torch.from_numpy(x["token_ids"]).long(),
            token_type_ids=torch.from_numpy(x["segment_ids"]).long(),
            attention_mask=torch.from_numpy(x["padding_mask"]).long(),
        ).last_hidden_state.numpy()
    real = x["padding_mask"].astype(bool)
    return np.abs(np.asarray(ours(x)["sequence_output"])[real] - expected[real]).max()


@pytest.mark.backends("tensorflow", "jax", "torch")
@pytest.mark.slow  # over 10 s: left out of `make test-fast`
def test_the_family_builds_runs_trains_and_round_trips(tmp_path):
    size = {**harness.SIZE, "max_sequence_length": 16, "position_buckets": 4}
    make = harness.seeded(lambda **o: DebertaV3Backbone(harness.VOCABULARY, **{**size, **o}))
    x = {**harness.encoder_inputs(), "segment_ids": np.zeros((2, 8), "int32")}
    harness.run_backbone_test(
        make, x, {"sequence_output": (2, 8, 16)}, tmp_path, "padding", "sequence_output"
    )

    def classifier(dtype=None, **overrides):
        backbone = make(**({} if dtype is None else {"dtype": dtype}), **overrides)
        return DebertaV3Classifier(backbone, num_classes=3)

    harness.run_task_test(classifier, x, np.array([0, 2]), tmp_path)
    assert registry.family_of(classifier()).name == "deberta"

    def tagger(dtype=None, **overrides):
        backbone = make(**({} if dtype is None else {"dtype": dtype}), **overrides)
        return DebertaV3TokenClassifier(backbone, num_classes=3)

    tags = np.tile([0, 1, 2, 0, 1, 2, 0, 1], (2, 1))
    harness.run_task_test(tagger, x, tags, tmp_path)
    assert registry.family("deberta").head("tagging", make(), 3).num_classes == 3

    def span_qa(dtype=None, **overrides):
        return DebertaV3SpanQA(make(**({} if dtype is None else {"dtype": dtype}), **overrides))

    spans = {"start_logits": np.array([3, 4]), "end_logits": np.array([5, 4])}
    harness.run_task_test(span_qa, x, spans, tmp_path)
    assert isinstance(registry.family("deberta").head("span_qa", make(), 0), DebertaV3SpanQA)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_hidden_states_match_transformers(tmp_path, variant):
    import transformers

    reference = perturbed(transformers.DebertaV2Model(_config(**VARIANTS[variant])))
    reference.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a bare model's checkpoint has nothing unused
        ours = from_pretrained(tmp_path)
    assert isinstance(ours, DebertaV3Backbone)
    x = inputs(segments=bool(ours.num_segments))
    assert difference(ours, reference, x) <= 1e-5


def test_save_pretrained_loads_in_transformers_with_our_outputs(tmp_path):
    import transformers

    keras.utils.set_random_seed(0)
    ours = DebertaV3Backbone(
        VOCABULARY_SIZE, 2, 2, 16, 24, max_sequence_length=32, position_buckets=8,
        initializer_range=0.3,
    )  # fmt: skip
    folder = ours.save_pretrained(tmp_path / "hf")
    reference = transformers.AutoModel.from_pretrained(folder).eval()
    assert type(reference).__name__ == "DebertaV2Model"
    assert difference(ours, reference, inputs()) <= 1e-5
    again = DebertaV3Backbone.from_pretrained(folder)
    np.testing.assert_array_equal(
        again(inputs())["sequence_output"], ours(inputs())["sequence_output"]
    )


def test_a_classifier_checkpoint_gives_its_backbone_and_names_what_is_left(tmp_path):
    import transformers

    reference = perturbed(transformers.DebertaV2ForSequenceClassification(_config(num_labels=2)))
    reference.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match="classifier.weight"):
        ours = DebertaV3Backbone.from_pretrained(tmp_path)
    assert difference(ours, reference.deberta, inputs()) <= 1e-5


def test_span_qa_equals_transformers_question_answering(tmp_path):
    """`DebertaV3SpanQA` on a `DebertaV2ForQuestionAnswering` checkpoint, its
    `qa_outputs` copied: the same start and end logits on the real tokens."""
    import transformers

    reference = perturbed(transformers.DebertaV2ForQuestionAnswering(_config()))
    reference.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match="qa_outputs.weight"):
        ours = DebertaV3SpanQA(DebertaV3Backbone.from_pretrained(tmp_path))
    head = reference.qa_outputs
    ours.span_dense.set_weights([head.weight.detach().numpy().T, head.bias.detach().numpy()])
    x = inputs()
    with torch.no_grad():
        expected = reference(
            input_ids=torch.from_numpy(x["token_ids"]).long(),
            attention_mask=torch.from_numpy(x["padding_mask"]).long(),
        )
    real = x["padding_mask"].astype(bool)
    outputs = ours(x)
    for key in ("start_logits", "end_logits"):
        theirs = getattr(expected, key).numpy()[real]
        assert np.abs(np.asarray(outputs[key])[real] - theirs).max() <= 1e-5


def test_what_we_cannot_follow_is_named(tmp_path):
    import transformers

    for overrides, match in (
        (dict(relative_attention=False), "relative_attention"),
        (dict(conv_kernel_size=3), "conv_kernel_size"),
        (dict(norm_rel_ebd="none"), "norm_rel_ebd"),
    ):
        transformers.DebertaV2Model(_config(**overrides)).save_pretrained(tmp_path)
        with pytest.raises(UserInputError, match=match):
            from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="attention_types"):
        DebertaV3Backbone(VOCABULARY_SIZE, 1, 2, 16, 24, attention_types=("p2p",))
    with pytest.raises(ValueError, match="deberta-v2"):
        DebertaV3Backbone(VOCABULARY_SIZE, 1, 2, 16, 24).save_pretrained(tmp_path, "bert")


@pytest.mark.backends("tensorflow", "jax", "torch")
def test_lora_adapts_the_backbone_and_the_classifier(tmp_path):
    size = {**harness.SIZE, "max_sequence_length": 16, "position_buckets": 4}
    make = harness.seeded(lambda **o: DebertaV3Backbone(harness.VOCABULARY, **{**size, **o}))
    deeper = harness.seeded(lambda: make(num_layers=3))
    x = {**harness.encoder_inputs(), "segment_ids": np.zeros((2, 8), "int32")}
    harness.run_lora_test(make, x, tmp_path, "sequence_output", other_architecture=deeper)
    classifier = harness.seeded(lambda **o: DebertaV3Classifier(make(**o), num_classes=2))
    (tmp_path / "classifier").mkdir()
    harness.run_lora_test(classifier, x, tmp_path / "classifier")
