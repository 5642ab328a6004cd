"""Qwen 2 and Qwen 3 GGUF files (`general.architecture` `qwen2`, `qwen3`): random models
written by `gguf`'s writer as llama.cpp's converter writes them (Hugging Face's query and
key row order, Qwen 2's projection biases, Qwen 3's query and key norms), read by us and
by `transformers`' GGUF loading: the same logits."""

import keras
import numpy as np
import pytest
import torch

from keras_attn.models import LlamaLanguageModel, from_gguf
from keras_attn.models.gguf import ARCHITECTURES
from tests.models.llama.gguf_files import write_llama_gguf

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

HEADS, KV_HEADS, LAYERS = 4, 2, 2
# `transformers` takes Qwen 3's head size from its default (128, every Qwen 3's), not from
# the file's `attention.key_length`: heads of 128 here.
HIDDEN = {"qwen2": 32, "qwen3": 4 * 128}


def _extra(architecture):
    """The tensors a Qwen block adds to a Llama block, by GGUF name (seeded)."""
    rng = np.random.default_rng(3)
    head_dim = HIDDEN[architecture] // HEADS
    tensors = {}
    for i in range(LAYERS):
        if architecture == "qwen2":
            for part, rows in (("q", HEADS), ("k", KV_HEADS), ("v", KV_HEADS)):
                bias = 0.3 * rng.standard_normal(rows * head_dim)
                tensors[f"blk.{i}.attn_{part}.bias"] = bias.astype("float32")
        else:
            for part in "qk":
                scale = 1 + 0.2 * rng.standard_normal(head_dim)
                tensors[f"blk.{i}.attn_{part}_norm.weight"] = scale.astype("float32")
    return tensors


@pytest.mark.parametrize("architecture", ["qwen2", "qwen3"])
@pytest.mark.parametrize("tied", [False, True])
def test_qwen_gguf_files_read_as_transformers_reads_them(tmp_path, architecture, tied):
    write_llama_gguf(
        tmp_path / "model.gguf",
        hidden=HIDDEN[architecture],
        heads=HEADS,
        kv_heads=KV_HEADS,
        layers=LAYERS,
        tied=tied,
        architecture=architecture,
        interleave=False,
        tensors=_extra(architecture),
        metadata={f"{architecture}.attention.key_length": HIDDEN[architecture] // HEADS},
    )
    ours = from_gguf(tmp_path / "model.gguf")
    assert type(ours) is LlamaLanguageModel
    assert (ours.qkv_bias, ours.qk_norm) == (architecture == "qwen2", architecture == "qwen3")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, gguf_file="model.gguf", dtype=torch.float32
    ).eval()
    assert theirs.config.model_type == architecture
    ids = np.random.default_rng(1).integers(0, 64, (2, 11))
    with torch.no_grad():
        expected = theirs(torch.tensor(ids)).logits.numpy()
    # Qwen 3's 512-wide sums in float32 (logits up to 7): 2.2e-5 measured, the issue's 1e-4.
    assert np.abs(np.asarray(ours(ids)) - expected).max() < (
        1e-5 if HIDDEN[architecture] < 64 else 1e-4
    )


def test_each_architecture_says_whether_its_rows_were_interleaved():
    """llama.cpp's converter interleaves Llama's query and key rows, not Qwen's or
    Gemma's; a file read with the wrong answer runs and answers wrongly."""
    from keras_attn.models import registry

    registry.discover()
    flags = {name: record.interleaved_rope_rows for name, record in ARCHITECTURES.items()}
    assert flags == {"llama": True, "qwen2": False, "qwen3": False, "gemma3": False}


@pytest.mark.parametrize(
    ("architecture", "pre"), [("qwen2", "qwen2"), ("qwen3", "qwen2"), ("llama", "llama-bpe")]
)
def test_qwen_and_llama_3_tokenizers_give_transformers_ids(tmp_path, architecture, pre):
    """Byte-level BPEs trained with Qwen 2's and Llama 3's patterns (upper-case
    contractions, a mark before a word, new lines after a mark, digits one or three to a
    piece), in Qwen and Llama GGUF files: ours, `transformers`' from the same file and the
    `tokenizers` reference give the same ids on the probes; a `.keras` round trip keeps it."""
    from tests.data.test_byte_level_bpe import SPLIT_PROBES
    from tests.models.llama.gguf_files import byte_level_bpe_metadata
    from tests.models.llama.test_gguf_tokenizer import PROBES

    metadata, reference = byte_level_bpe_metadata(pre=pre)
    write_llama_gguf(
        tmp_path / "model.gguf",
        vocabulary=len(metadata["token_list"]),
        hidden=HIDDEN.get(architecture, 32),
        heads=HEADS,
        kv_heads=KV_HEADS,
        layers=LAYERS,
        architecture=architecture,
        interleave=architecture == "llama",
        tensors=_extra(architecture) if architecture in HIDDEN else None,
        tokenizer=metadata,
    )
    model = from_gguf(tmp_path / "model.gguf")
    tokenizer = model.preprocessor.tokenizer
    assert tokenizer.split == {"qwen2": "qwen2", "llama-bpe": "llama3"}[pre]
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file="model.gguf")
    probes = PROBES + SPLIT_PROBES + ["IT'S (them)!\n\n 1234 你好\tthe", "<|im_end|>x(y"]
    ours = [[int(i) for i in row] for row in tokenizer(probes)]
    assert ours == [theirs(text, add_special_tokens=False).input_ids for text in probes]
    assert ours == [reference.encode(text).ids for text in probes]
    assert any(len(reference.decode([i])) > 2 for row in ours for i in row)  # merges ran
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert [[int(i) for i in row] for row in loaded.preprocessor.tokenizer(probes)] == ours
