"""`from_gguf(path, keep_blocks=True)` on the shipped SmolLM2 file: its projections and
tied embedding stay in the file's Q4_1 / Q8_0 blocks (variables of about the file's
size), and its logits equal `transformers`' reading of the same file (the recorded
reference, tests/models/gguf_reference_run.py); a model with blocks has no float weights
to write out, and adapters on it are not merged into the blocks (refused by name)."""

import numpy as np
import pytest

from keras_attn.layers import BlockDense, BlockEmbedding
from keras_attn.models import from_gguf
from keras_attn.models.gguf.reader import packaged_gguf
from tests.models.gguf_reference_run import INPUTS, logits_differences, reference, sha256

pytestmark = pytest.mark.slow


def test_smollm2_kept_in_its_blocks_answers_as_transformers():
    path = packaged_gguf("smollm2")
    found, kept_logits = reference("smollm2")
    assert sha256(path) == found["file"]["sha256"]
    kept = from_gguf(path, keep_blocks=True)
    assert isinstance(kept.token_embedding, BlockEmbedding)
    block = kept.transformer_layers[0]
    assert isinstance(block.self_attention.query_dense, BlockDense)
    assert block.feedforward_output_dense.block_format.startswith("Q4_1")
    assert kept.get_config()["kernel_formats"]["token_embedding"] == "Q8_0"
    size = sum(np.prod(v.shape) * np.dtype(str(v.dtype)).itemsize for v in kept.weights)
    assert size <= 1.3 * path.stat().st_size, size
    logits = np.asarray(kept(np.array(INPUTS["smollm2"]["ids"])))[0]
    differences = logits_differences(logits, kept_logits)
    assert max(differences.values()) < 1e-4, differences
    with pytest.raises(ValueError, match="kept in GGUF's blocks"):
        kept.save_gguf("never-written.gguf")
    kept.enable_lora(4)  # float adapters on the query and value blocks
    assert kept.lora_rank == 4 and all("lora" in w.name for w in kept.trainable_weights)
    with pytest.raises(ValueError, match="Merging adapters into projections kept in GGUF"):
        kept.merged_copy()
