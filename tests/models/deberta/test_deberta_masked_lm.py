"""`DebertaV3MaskedLM`: the enhanced mask decoder equals Microsoft's `EnhancedMaskDecoder`
wiring transcribed over `transformers`' own DeBERTa layer (`DebertaV2Layer` with
`query_states`) and masked-LM head (`DebertaV2LMPredictionHead`), weights copied; a
backbone with absolute positions has the plain head; it trains and reloads on every
backend; bad settings are named."""

import numpy as np
import pytest
import torch

from keras_attn.models import DebertaV3Backbone, DebertaV3MaskedLM
from tests import model_harness as harness
from tests.models.deberta.test_deberta_family import VARIANTS, _config, inputs, perturbed

# A few steps of a small model each, the traced steps being the family's and
# tests/training's: run eagerly (conftest.py's `eager`), about 40% of the traced time.
pytestmark = pytest.mark.eager

MASKED = np.array([[1, 5, 9], [0, 4, 12], [2, 1, 0]])  # row 2: inside its 3 real tokens


def _copy_head(ours, config):
    """`transformers`' `DebertaV2LMPredictionHead` holding our head's weights."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2LMPredictionHead

    head = ours.masked_lm_head
    reference = DebertaV2LMPredictionHead(config).eval()
    kernel, bias = (np.asarray(w) for w in head.dense.weights)
    gamma, beta = (np.asarray(w) for w in head.layer_norm.weights)
    with torch.no_grad():
        reference.dense.weight.copy_(torch.from_numpy(kernel.T))
        reference.dense.bias.copy_(torch.from_numpy(bias))
        reference.LayerNorm.weight.copy_(torch.from_numpy(gamma))
        reference.LayerNorm.bias.copy_(torch.from_numpy(beta))
        reference.bias.copy_(torch.from_numpy(np.asarray(head.output_bias)))
    return reference


def _ours(tmp_path, overrides):
    import transformers

    config = _config(**overrides)
    reference = perturbed(transformers.DebertaV2Model(config))
    reference.save_pretrained(tmp_path)
    ours = DebertaV3MaskedLM(DebertaV3Backbone.from_pretrained(tmp_path))
    rng = np.random.default_rng(1)
    ours.set_weights([w + 0.1 * rng.standard_normal(w.shape) for w in ours.get_weights()])
    ours.backbone.set_weights(DebertaV3Backbone.from_pretrained(tmp_path).get_weights())
    x = {**inputs(segments=bool(ours.backbone.num_segments)), "masked_positions": MASKED}
    return ours, reference, config, x


def _torch_inputs(x):
    return (
        torch.from_numpy(x["token_ids"]).long(),
        torch.from_numpy(x["segment_ids"]).long(),
        torch.from_numpy(x["padding_mask"]).long(),
    )


def _compare(ours, expected_sequence, reference_head, word_embeddings, x):
    rows = np.arange(len(MASKED))[:, None]
    with torch.no_grad():
        expected = reference_head(expected_sequence[rows, MASKED], word_embeddings).numpy()
    got = np.asarray(ours(x)["mlm_logits"])
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-5


def test_the_enhanced_mask_decoder_equals_the_transcription_over_transformers_layers(tmp_path):
    ours, reference, config, x = _ours(tmp_path, {})
    assert ours.enhanced_mask_decoder
    token_ids, segment_ids, mask = _torch_inputs(x)
    with torch.no_grad():
        hidden = reference(
            input_ids=token_ids, attention_mask=mask, output_hidden_states=True
        ).hidden_states[-2]  # the last layer's input
        # Microsoft's EnhancedMaskDecoder.emd_context_layer, on transformers' layer:
        encoder, layer = reference.encoder, reference.encoder.layer[-1]
        positions = np.asarray(ours.decoder_positions.embeddings)[: x["token_ids"].shape[1]]
        query = hidden + torch.from_numpy(positions)[None]
        for _ in range(2):
            query = layer(
                hidden,
                encoder.get_attention_mask(mask),
                query_states=query,
                relative_pos=encoder.get_rel_pos(hidden),
                rel_embeddings=encoder.get_rel_embedding(),
            )[0]
    _compare(ours, query, _copy_head(ours, config), reference.embeddings.word_embeddings, x)


@pytest.mark.parametrize("variant", ["absolute-positions", "no-decoder"])
def test_without_the_decoder_the_head_reads_the_last_layer(tmp_path, variant):
    overrides = VARIANTS["exact-distances-absolute-positions-segments"]
    if variant == "no-decoder":
        overrides = {}
    ours, reference, config, x = _ours(tmp_path, overrides)
    if variant == "no-decoder":
        ours = DebertaV3MaskedLM(ours.backbone, enhanced_mask_decoder=False)
    assert not ours.enhanced_mask_decoder and ours.decoder_positions is None
    token_ids, segment_ids, mask = _torch_inputs(x)
    with torch.no_grad():
        sequence = reference(
            input_ids=token_ids, token_type_ids=segment_ids, attention_mask=mask
        ).last_hidden_state
    head = _copy_head(ours, config)
    _compare(ours, sequence, head, reference.embeddings.word_embeddings, x)


@pytest.mark.backends("tensorflow", "jax", "torch")
def test_it_trains_and_reloads_on_every_backend(tmp_path):
    size = {**harness.SIZE, "max_sequence_length": 16, "position_buckets": 4}
    make = harness.seeded(lambda **o: DebertaV3Backbone(harness.VOCABULARY, **{**size, **o}))
    x = {
        **harness.encoder_inputs(),
        "segment_ids": np.zeros((2, 8), "int32"),
        "masked_positions": np.array([[1, 3], [2, 5]]),
    }

    def masked_lm(dtype=None, **overrides):
        return DebertaV3MaskedLM(make(**({} if dtype is None else {"dtype": dtype}), **overrides))

    model = harness.run_task_test(masked_lm, x, np.array([[4, 6], [7, 8]]), tmp_path)
    assert model.enhanced_mask_decoder


def test_bad_settings_are_named():
    backbone = DebertaV3Backbone.from_size("tiny", vocabulary_size=50)
    with pytest.raises(TypeError, match="enhanced_mask_decoder"):
        DebertaV3MaskedLM(backbone, enhanced_mask_decoder="yes")
    absolute = DebertaV3Backbone.from_size("tiny", vocabulary_size=50, position_biased_input=True)
    with pytest.raises(ValueError, match="position_biased_input=True"):
        DebertaV3MaskedLM(absolute, enhanced_mask_decoder=True)
    with pytest.raises(TypeError, match="DebertaV3Backbone"):
        DebertaV3MaskedLM(object())
