"""`from_gguf(path, keep_blocks=True)` on the shipped SmolLM2 file: its projections and
tied embedding stay in the file's Q4_1 / Q8_0 blocks (variables of about the file's
size), and its logits equal the float32 model's (which tests/models/test_gguf_references.py
holds to `transformers`'); a model with blocks has no float weights to write out."""

import numpy as np
import pytest

from keras_attn.layers import BlockDense, BlockEmbedding
from keras_attn.models import from_gguf
from keras_attn.models.gguf.reader import packaged_gguf
from tests.helpers import to_numpy

pytestmark = pytest.mark.slow


def test_smollm2_kept_in_its_blocks_answers_as_its_float_model():
    path = packaged_gguf("smollm2")
    kept = from_gguf(path, keep_blocks=True)
    assert isinstance(kept.token_embedding, BlockEmbedding)
    block = kept.transformer_layers[0]
    assert isinstance(block.self_attention.query_dense, BlockDense)
    assert block.feedforward_output_dense.block_format == "Q4_1"
    assert kept.get_config()["kernel_formats"]["token_embedding"] == "Q8_0"
    size = sum(np.prod(v.shape) * np.dtype(str(v.dtype)).itemsize for v in kept.weights)
    assert size <= 1.3 * path.stat().st_size, size
    ids = np.arange(100, 112, dtype="int32")[None]
    positions = np.arange(12)[None]
    ours = to_numpy(kept.logits_at(ids, positions))
    floats = to_numpy(from_gguf(path).logits_at(ids, positions))
    np.testing.assert_allclose(ours, floats, atol=2e-4)
    assert (ours.argmax(-1) == floats.argmax(-1)).all()
    with pytest.raises(ValueError, match="kept in GGUF's blocks"):
        kept.save_gguf("never-written.gguf")
