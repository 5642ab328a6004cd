"""Every model family through the shared harness (`tests/model_harness.py`), on
TensorFlow, JAX and PyTorch: builds, runs, masks, mixed precision, a training step,
`.keras` round trip; and its task models fit with their own defaults."""

import numpy as np
import pytest

from keras_attn.models import GenerationConfig, streaming
from tests import model_harness as harness

pytestmark = pytest.mark.backends("tensorflow", "jax", "torch")


def _lm_data(length=8):
    ids = harness._ids((2, length + 1))
    return ids[:, :-1], ids[:, 1:]


@pytest.mark.slow  # 5 s on the 2 busy cores: out of `make test-fast`
def test_bert(tmp_path):
    shapes = {"sequence_output": (2, 8, 16), "pooled_output": (2, 16)}
    harness.run_backbone_test(
        harness.tiny_bert, harness.encoder_inputs(), shapes, tmp_path, "padding", "sequence_output"
    )
    harness.run_task_test(
        harness.tiny_bert_classifier, harness.encoder_inputs(), np.array([0, 2]), tmp_path
    )


@pytest.mark.slow  # 5.7 s; tests/models/xlnet has faster ones
def test_xlnet(tmp_path):
    harness.run_backbone_test(
        harness.tiny_xlnet,
        harness.encoder_inputs(),
        {"sequence_output": (2, 8, 16)},
        tmp_path,
        "padding",
        "sequence_output",
        # The segment term's bias multiplies zero-initialised segment encodings; the
        # mask embedding is the query stream's (pre-training), not the content stream's.
        no_gradient=("segment_bias", "mask_embedding/embeddings"),
    )
    harness.run_task_test(
        harness.tiny_xlnet_classifier, harness.encoder_inputs(), np.array([0, 2]), tmp_path
    )


@pytest.mark.parametrize("family", ["gpt", "llama", "gemma", "transformer_xl"])
@pytest.mark.slow  # over 10 s: left out of `make test-fast`
def test_language_models(tmp_path, family):
    make = getattr(harness, f"tiny_{family}")
    x, y = _lm_data()
    harness.run_backbone_test(make, x, (2, 8, harness.VOCABULARY), tmp_path, "causal")
    model = harness.run_task_test(make, x, y, tmp_path)
    # One generation API: a beam of one is greedy decoding, on every backend.
    prompts = [[5, 6, 7], [9]]
    greedy = model.generate(prompts, config=GenerationConfig(max_length=8))
    one_beam = model.generate(
        prompts, config=GenerationConfig(strategy="beam", num_beams=1, max_length=8)
    )
    assert greedy.shape == (2, 8) and (greedy == one_beam).all()
    # Streamed token by token (prefill, then a compiled step each): the same ids.
    streamed = streaming.stream_ids(model, prompts[0], GenerationConfig(max_length=8), 8, True)
    assert list(streamed) == greedy[0, 3:].tolist()


@pytest.mark.slow  # over 10 s: left out of `make test-fast`
def test_seq2seq(tmp_path):
    target = harness._ids((2, 8), seed=1)
    x = {"encoder_token_ids": harness._ids((2, 6)), "decoder_token_ids": target[:, :-1]}
    harness.run_backbone_test(harness.tiny_seq2seq, x, (2, 7, harness.VOCABULARY), tmp_path)
    harness.run_task_test(harness.tiny_seq2seq, x, target[:, 1:], tmp_path)
