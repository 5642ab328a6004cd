"""A GGUF architecture is one record (`keras_attn.models.gguf.GGUFArchitecture`): a toy
architecture added in this file alone is read by `from_gguf`; its query and key rows
are taken as the record says (interleaved for GGML's RoPE or not), and the flag matters:
the same file read with the other answer gives other logits, which no size check sees."""

import dataclasses

import numpy as np
import pytest

from keras_attn.checkpoints import CheckpointError
from keras_attn.models import from_gguf
from keras_attn.models.gguf import ARCHITECTURES, GGUFArchitecture, add_gguf_architecture
from keras_attn.models.gguf.architectures import rope_halves
from tests.models.llama.gguf_files import _interleaved, write_llama_gguf

IDS = np.random.default_rng(1).integers(0, 64, (2, 9)).astype("int32")


@pytest.fixture
def toy():
    """`plainllama`: Llama's record, its query and key rows kept in Hugging Face's order
    (as llama.cpp's converter writes Qwen2's)."""
    record = dataclasses.replace(
        ARCHITECTURES["llama"], name="plainllama", interleaved_rope_rows=False
    )
    add_gguf_architecture(record)
    try:
        yield record
    finally:
        ARCHITECTURES.pop("plainllama")


def logits(path):
    return np.asarray(from_gguf(path)(IDS))


def test_a_toy_architecture_is_one_record_and_its_rope_rows_are_read_as_it_says(toy, tmp_path):
    write_llama_gguf(tmp_path / "llama.gguf", seed=3)
    write_llama_gguf(tmp_path / "plain.gguf", seed=3, architecture="plainllama", interleave=False)
    expected = logits(tmp_path / "llama.gguf")
    np.testing.assert_allclose(logits(tmp_path / "plain.gguf"), expected, atol=1e-5)
    # The flag matters: the same rows read as interleaved load, run and answer wrongly.
    wrong = dataclasses.replace(toy, interleaved_rope_rows=True)
    ARCHITECTURES["plainllama"] = wrong
    assert np.abs(logits(tmp_path / "plain.gguf") - expected).max() > 1e-2


def test_the_built_in_records_state_their_rope_rows():
    assert ARCHITECTURES["llama"].interleaved_rope_rows is True
    assert ARCHITECTURES["gemma3"].interleaved_rope_rows is False
    assert ARCHITECTURES["gemma3"].norm_offset == 1.0
    with pytest.raises(TypeError, match="interleaved_rope_rows"):
        GGUFArchitecture(
            name="x", tensor_names={}, config=dict, build=dict, family="llama"
        )  # no default: every architecture says it


def test_rope_halves_undo_llama_cpps_interleave():
    rows = np.random.default_rng(0).normal(size=(4 * 8, 5)).astype("float32")
    np.testing.assert_array_equal(rope_halves(_interleaved(rows, 4), 4), rows)
    with pytest.raises(CheckpointError, match="30 rows for 4 heads"):
        rope_halves(rows[:30], 4)


def test_an_unknown_architecture_and_a_taken_name_are_refused(toy, tmp_path):
    write_llama_gguf(tmp_path / "qwen9.gguf", architecture="qwen9")
    with pytest.raises(CheckpointError, match=r"'qwen9' is not one we read \(\[.*'llama'"):
        from_gguf(tmp_path / "qwen9.gguf")
    with pytest.raises(ValueError, match="'plainllama' is read already"):
        add_gguf_architecture(dataclasses.replace(toy, family="gemma"))
    add_gguf_architecture(toy)  # the same record again: nothing changes
    with pytest.raises(TypeError, match="GGUFArchitecture"):
        add_gguf_architecture({"name": "dict"})
