"""RoBERTa in and out of Hugging Face: random `transformers` models (every weight
perturbed, saved with `save_pretrained`) load into `RobertaBackbone` with the same hidden
states on the real tokens (right and left padding), ours load back into `AutoModel`
with ours; the family runs on every backend; bad arguments are named."""

import warnings

import numpy as np
import pytest
import torch

from keras_attn.errors import UserInputError
from keras_attn.models import BertClassifier, RobertaBackbone, from_pretrained, registry
from tests import model_harness as harness

VOCABULARY_SIZE, LENGTH = 60, 9


def _config(**overrides):
    import transformers

    sizes = dict(
        vocab_size=VOCABULARY_SIZE,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=24,
        max_position_embeddings=20,
    )
    return transformers.RobertaConfig(**{**sizes, **overrides})


def perturbed(model, seed=0):
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model.eval()


def inputs(padding_token_id=1):
    """Three rows, two of them right-padded with `<pad>`; one segment."""
    rng = np.random.default_rng(0)
    token_ids = rng.integers(3, VOCABULARY_SIZE, (3, LENGTH)).astype("int32")
    padding_mask = np.ones((3, LENGTH), "int32")
    padding_mask[1, 6:] = padding_mask[2, 3:] = 0
    token_ids[padding_mask == 0] = padding_token_id
    return {
        "token_ids": token_ids,
        "segment_ids": np.zeros_like(token_ids),
        "padding_mask": padding_mask,
    }


def theirs(model, x):
    with torch.no_grad():
        return model(
            input_ids=torch.from_numpy(x["token_ids"]).long(),
            attention_mask=torch.from_numpy(x["padding_mask"]).long(),
        )


def differences(ours, reference, x):
    outputs, expected = ours(x), theirs(reference, x)
    real = x["padding_mask"].astype(bool)
    sequence = np.abs(
        np.asarray(outputs["sequence_output"])[real] - expected.last_hidden_state.numpy()[real]
    ).max()
    pooled = np.abs(np.asarray(outputs["pooled_output"]) - expected.pooler_output.numpy()).max()
    return sequence, pooled


@pytest.mark.slow
@pytest.mark.backends("tensorflow", "jax", "torch")
def test_the_family_builds_runs_trains_and_round_trips(tmp_path):
    make = harness.seeded(
        lambda **o: RobertaBackbone(
            harness.VOCABULARY, **{**harness.SIZE, "max_sequence_length": 8, **o}
        )
    )
    x = {**harness.encoder_inputs(), "segment_ids": np.zeros((2, 8), "int32")}
    shapes = {"sequence_output": (2, 8, 16), "pooled_output": (2, 16)}
    harness.run_backbone_test(make, x, shapes, tmp_path, "padding", "sequence_output")

    def classifier(dtype=None, **overrides):
        backbone = make(**({} if dtype is None else {"dtype": dtype}), **overrides)
        return BertClassifier(backbone, num_classes=3)

    harness.run_task_test(classifier, x, np.array([0, 2]), tmp_path)
    assert registry.family_of(make()).name == "roberta"


@pytest.mark.parametrize("padding_token_id", [1, 0])
def test_hidden_states_match_transformers(tmp_path, padding_token_id):
    import transformers

    config = _config(pad_token_id=padding_token_id)
    reference = perturbed(transformers.RobertaModel(config))
    reference.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a bare model's checkpoint has nothing unused
        ours = from_pretrained(tmp_path)
    assert isinstance(ours, RobertaBackbone)
    positions = 20 - padding_token_id - 1  # the rows after the padding index
    assert (ours.max_sequence_length, ours.padding_token_id) == (positions, padding_token_id)
    x = inputs(padding_token_id)
    assert max(differences(ours, reference, x)) <= 1e-5
    # Left padding: Hugging Face counts positions over the real tokens; so do we (the
    # pooler reads the first token, here a pad: not compared).
    left = {k: np.roll(v, 3, axis=1) for k, v in x.items()}
    left["token_ids"][0, :3] = padding_token_id
    left["padding_mask"][0, :3] = 0
    assert differences(ours, reference, left)[0] <= 1e-5


def test_a_task_model_s_checkpoint_loads_without_its_pooler(tmp_path):
    import transformers

    reference = perturbed(transformers.RobertaForSequenceClassification(_config(num_labels=2)))
    reference.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match="classifier.dense.weight"):
        ours = RobertaBackbone.from_pretrained(tmp_path)
    x = inputs()
    expected = theirs(reference.roberta, x).last_hidden_state.numpy()
    real = x["padding_mask"].astype(bool)
    got = np.asarray(ours(x)["sequence_output"])
    assert np.abs(got[real] - expected[real]).max() <= 1e-5


def test_save_pretrained_loads_in_transformers_with_our_outputs(tmp_path):
    import keras
    import transformers

    keras.utils.set_random_seed(0)
    ours = RobertaBackbone(
        VOCABULARY_SIZE, 2, 2, 16, 24, max_sequence_length=12, initializer_range=0.3
    )
    folder = ours.save_pretrained(tmp_path / "hf")
    reference = transformers.AutoModel.from_pretrained(folder).eval()
    assert type(reference).__name__ == "RobertaModel"
    assert reference.config.max_position_embeddings == 14
    assert max(differences(ours, reference, inputs())) <= 1e-5
    again = RobertaBackbone.from_pretrained(folder)
    np.testing.assert_array_equal(
        again(inputs())["sequence_output"], ours(inputs())["sequence_output"]
    )


def test_bad_arguments_and_checkpoints_are_named(tmp_path):
    with pytest.raises(ValueError, match="padding_token_id"):
        RobertaBackbone(VOCABULARY_SIZE, 1, 2, 16, 24, padding_token_id=VOCABULARY_SIZE)
    with pytest.raises(ValueError, match="norm_first=True"):
        RobertaBackbone(VOCABULARY_SIZE, 1, 2, 16, 24, norm_first=True).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="model_type 'roberta'"):
        RobertaBackbone(VOCABULARY_SIZE, 1, 2, 16, 24).save_pretrained(tmp_path, "bert")
    import transformers

    transformers.RobertaModel(_config(max_position_embeddings=2)).save_pretrained(tmp_path / "x")
    with pytest.raises(UserInputError, match="max_position_embeddings above"):
        from_pretrained(tmp_path / "x")


@pytest.mark.backends("tensorflow", "jax", "torch")
def test_lora_adapts_the_backbone(tmp_path):
    size = {**harness.SIZE, "max_sequence_length": 8}
    make = harness.seeded(lambda **o: RobertaBackbone(harness.VOCABULARY, **{**size, **o}))
    deeper = harness.seeded(lambda: make(num_layers=3))
    x = {**harness.encoder_inputs(), "segment_ids": np.zeros((2, 8), "int32")}
    harness.run_lora_test(make, x, tmp_path, "sequence_output", other_architecture=deeper)
