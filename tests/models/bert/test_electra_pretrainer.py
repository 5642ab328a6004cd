"""ElectraPretrainer: replaced token detection's properties (samples equal to the original
are "original", no gradient through the sample, padding never scored, one set of shared
embeddings), logits equal to `transformers`' ELECTRA on the same weights, `.keras` round
trip, bad arguments named."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch

from keras_attn.models import BertBackbone, ElectraPretrainer

VOCABULARY, LENGTH, PREDICTIONS = 60, 12, 3


def _pretrainer(seed=0, **kwargs):
    discriminator = BertBackbone(VOCABULARY, 2, 2, 32, 64, max_sequence_length=16)
    generator = BertBackbone(VOCABULARY, 1, 2, 8, 16, max_sequence_length=16, embedding_dim=32)
    return ElectraPretrainer(generator, discriminator, seed=seed, **kwargs)


def _batch(n=4, seed=0):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, VOCABULARY, (n, LENGTH)).astype("int32")
    padding_mask = np.ones((n, LENGTH), "int32")
    padding_mask[:, 9:] = 0
    padding_mask[0, 6:] = 0
    token_ids[padding_mask == 0] = 0
    positions = np.stack(
        [rng.choice(np.arange(1, 6), PREDICTIONS, replace=False) for _ in range(n)]
    ).astype("int32")
    masked_ids = np.take_along_axis(token_ids, positions, 1)
    masked = token_ids.copy()
    np.put_along_axis(masked, positions, 4, 1)  # [MASK]
    weights = np.ones((n, PREDICTIONS), "float32")
    weights[:, -1] = 0  # a padding prediction: its position must not be replaced
    return {
        "token_ids": masked,
        "segment_ids": np.zeros((n, LENGTH), "int32"),
        "padding_mask": padding_mask,
        "masked_positions": positions,
        "masked_ids": masked_ids,
        "masked_weights": weights,
    }


def _original(x):
    original = x["token_ids"].copy()
    for row, (positions, ids, weights) in enumerate(
        zip(x["masked_positions"], x["masked_ids"], x["masked_weights"], strict=True)
    ):
        for position, token, weight in zip(positions, ids, weights, strict=True):
            if weight:
                original[row, position] = token
    return original


def _force_generator(pretrainer, x, token):
    """The generator's softmax all on `token` (a huge output bias)."""
    pretrainer(x)  # build
    bias = np.zeros(VOCABULARY, "float32")
    bias[token] = 1e4
    pretrainer.masked_lm_head.output_bias.assign(bias)


def test_a_sample_equal_to_the_original_is_labelled_original():
    x = _batch()
    x["masked_ids"][:] = 7  # every masked position held token 7
    pretrainer = _pretrainer()
    _force_generator(pretrainer, x, 7)
    outputs = pretrainer(x)
    original = _original(x)
    np.testing.assert_array_equal(np.asarray(outputs["corrupted_ids"]), original)
    assert not np.any(np.asarray(outputs["rtd_labels"]))
    # Forced to another token: exactly the real masked positions are "replaced".
    _force_generator(pretrainer, x, 9)
    outputs = pretrainer(x)
    expected = np.zeros((len(original), LENGTH), "int32")
    for row, (positions, weights) in enumerate(
        zip(x["masked_positions"], x["masked_weights"], strict=True)
    ):
        expected[row, positions[weights > 0]] = 1
    np.testing.assert_array_equal(np.asarray(outputs["rtd_labels"]), expected)
    corrupted = np.asarray(outputs["corrupted_ids"])
    assert np.all(corrupted[expected == 1] == 9)
    np.testing.assert_array_equal(corrupted[expected == 0], original[expected == 0])


def test_the_discriminator_loss_sends_no_gradient_into_the_generator():
    pretrainer, x = _pretrainer(), _batch()
    pretrainer(x)
    theirs = {id(v) for v in pretrainer.discriminator.weights}  # the shared tables too
    mine = {id(v) for v in pretrainer.generator.weights + pretrainer.masked_lm_head.weights}
    generator_only = [
        v for v in pretrainer.trainable_weights if id(v) in mine and id(v) not in theirs
    ]
    assert len(generator_only) > 10
    with tf.GradientTape(persistent=True) as tape:
        outputs = pretrainer(x, training=True)
        mlm_loss, rtd_loss = pretrainer._objectives(x, outputs)
    rtd_gradients = tape.gradient(rtd_loss, generator_only)
    assert all(g is None or not np.any(np.asarray(g)) for g in rtd_gradients)
    mlm_gradients = tape.gradient(mlm_loss, generator_only)
    assert all(g is not None for g in mlm_gradients)  # the generator does learn from MLM
    # The shared embeddings learn from both objectives.
    table = pretrainer.discriminator.token_embedding.embeddings
    assert np.any(np.asarray(tf.convert_to_tensor(tape.gradient(rtd_loss, table))))


def test_padding_is_never_scored():
    pretrainer, x = _pretrainer(), _batch()
    outputs = pretrainer(x)
    padding = x["padding_mask"] == 0
    assert not np.any(np.asarray(outputs["rtd_labels"])[padding])
    changed = dict(outputs)
    changed["rtd_logits"] = np.where(padding, 1e3, np.asarray(outputs["rtd_logits"]))
    _, rtd_loss = pretrainer._objectives(x, outputs)
    _, rtd_loss_changed = pretrainer._objectives(x, changed)
    assert float(rtd_loss) == pytest.approx(float(rtd_loss_changed), abs=1e-6)


def test_shared_embeddings_are_one_variable_and_stay_so_after_a_round_trip(tmp_path):
    pretrainer = _pretrainer()
    x = _batch()
    pretrainer(x)
    generator, discriminator = pretrainer.generator, pretrainer.discriminator
    for name in ("token_embedding", "segment_embedding", "position_embedding"):
        assert getattr(generator, name) is getattr(discriminator, name)
    assert generator.embeddings_layer_norm is discriminator.embeddings_layer_norm
    paths = [v.path for v in pretrainer.weights]
    assert len(paths) == len(set(map(id, pretrainer.weights)))
    pretrainer.save(tmp_path / "electra.keras")
    restored = keras.saving.load_model(tmp_path / "electra.keras")
    assert restored.generator.token_embedding is restored.discriminator.token_embedding
    for method in ("generator_logits", "discriminator_logits"):
        np.testing.assert_array_equal(
            np.asarray(getattr(restored, method)(x)), np.asarray(getattr(pretrainer, method)(x))
        )
    assert restored.get_config()["rtd_weight"] == 50.0
    restored.compile()  # the losses are the model's own; Adam unless told otherwise
    assert isinstance(restored.optimizer, keras.optimizers.Adam)


@pytest.mark.slow  # 10-12 s: out of `make test-fast`
def test_fit_learns_and_reports_the_papers_metrics():
    pretrainer = _pretrainer(seed=1)
    pretrainer.compile(optimizer=keras.optimizers.Adam(2e-3))
    batches = [_batch(16, seed) for seed in range(8)]
    x = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the unused poolers are left out: no gradient warning
        history = pretrainer.fit(x, batch_size=16, epochs=4, verbose=0).history
    assert set(history) == {
        "loss",
        "mlm_loss",
        "rtd_loss",
        "mlm_accuracy",
        "rtd_accuracy",
        "replaced",
        "rtd_auc",
        "rtd_recall",
    }
    loss = history["loss"]
    assert loss[-1] < loss[0]
    np.testing.assert_allclose(
        loss, np.add(history["mlm_loss"], np.multiply(50.0, history["rtd_loss"])), rtol=1e-4
    )
    # 2 real predictions among 8 or 5 real tokens: a generator that is mostly wrong
    # replaces about that share.
    assert 0.0 < history["replaced"][0] <= 2 / 5 + 1e-6


def test_bad_arguments_are_named():
    discriminator = BertBackbone(VOCABULARY, 1, 2, 16, 32, max_sequence_length=16)
    with pytest.raises(ValueError, match="no wider than its discriminator.*hidden_dim=32"):
        ElectraPretrainer(BertBackbone(VOCABULARY, 1, 2, 32, 32), discriminator)
    with pytest.raises(ValueError, match="embedding_dim=16"):
        ElectraPretrainer(
            BertBackbone(VOCABULARY, 1, 2, 8, 16, max_sequence_length=16), discriminator
        )
    with pytest.raises(ValueError, match="vocabulary_size"):
        ElectraPretrainer(
            BertBackbone(VOCABULARY + 1, 1, 2, 8, 16, max_sequence_length=16, embedding_dim=16),
            discriminator,
        )
    with pytest.raises(TypeError, match="`generator` to be a BertBackbone"):
        ElectraPretrainer(keras.Sequential(), discriminator)
    small = BertBackbone(VOCABULARY, 1, 2, 8, 16, max_sequence_length=16, embedding_dim=16)
    with pytest.raises(ValueError, match="rtd_weight"):
        ElectraPretrainer(small, discriminator, rtd_weight=0)


def _hugging_face_pair(folder):
    """A random ELECTRA as Google trains it: one embedding set, the generator's output
    tied to it; every weight perturbed."""
    import transformers

    sizes = dict(vocab_size=VOCABULARY, embedding_size=24, max_position_embeddings=16)
    torch.manual_seed(0)
    discriminator = transformers.ElectraForPreTraining(
        transformers.ElectraConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            **sizes,
        )
    ).eval()
    generator = transformers.ElectraForMaskedLM(
        transformers.ElectraConfig(
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=24,
            **sizes,
        )
    ).eval()
    with torch.no_grad():
        for model in (discriminator, generator):
            for parameter in model.parameters():
                parameter.add_(0.1 * torch.randn_like(parameter))
        generator.electra.embeddings.load_state_dict(discriminator.electra.embeddings.state_dict())
        generator.generator_lm_head.weight = generator.electra.embeddings.word_embeddings.weight
    generator.save_pretrained(folder / "generator")
    discriminator.save_pretrained(folder / "discriminator")
    return generator, discriminator


def test_logits_equal_transformers_electra(tmp_path):
    theirs_generator, theirs_discriminator = _hugging_face_pair(tmp_path)
    ours = ElectraPretrainer.from_pretrained(tmp_path / "generator", tmp_path / "discriminator")
    x = _batch()
    real = x["padding_mask"].astype(bool)
    with torch.no_grad():
        kwargs = dict(
            input_ids=torch.from_numpy(x["token_ids"]).long(),
            attention_mask=torch.from_numpy(x["padding_mask"]).long(),
            token_type_ids=torch.from_numpy(x["segment_ids"]).long(),
        )
        mlm = theirs_generator(**kwargs).logits.numpy()
        rtd = theirs_discriminator(**kwargs).logits.numpy()
    expected_mlm = np.take_along_axis(mlm, x["masked_positions"][..., None], 1)
    assert np.abs(np.asarray(ours.generator_logits(x)) - expected_mlm).max() <= 1e-5
    assert np.abs(np.asarray(ours.discriminator_logits(x))[real] - rtd[real]).max() <= 1e-5


def test_a_pair_that_does_not_share_embeddings_is_refused(tmp_path):
    import transformers

    _hugging_face_pair(tmp_path)
    other = transformers.ElectraForMaskedLM.from_pretrained(tmp_path / "generator")
    with torch.no_grad():
        other.electra.embeddings.position_embeddings.weight.add_(1.0)
    other.save_pretrained(tmp_path / "other")
    with pytest.raises(ValueError, match="not one ELECTRA.*position_embeddings"):
        ElectraPretrainer.from_pretrained(tmp_path / "other", tmp_path / "discriminator")
