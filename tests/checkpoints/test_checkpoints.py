"""keras_attn.checkpoints: a Hugging Face folder written and read back, `safetensors`'
own reader agreeing; the transforms against torch's Linear; assignment all or nothing;
errors that name the file."""

import json

import keras
import numpy as np
import pytest
import torch

from keras_attn import checkpoints
from keras_attn.errors import UserInputError


def test_a_written_folder_reads_back_and_safetensors_agrees(tmp_path):
    from safetensors.numpy import load_file

    tensors = {"a.weight": np.arange(6, dtype="float32").reshape(2, 3).T}  # not contiguous
    folder = checkpoints.write_hf_folder(tmp_path / "m", {"model_type": "x"}, tensors)
    config, read = checkpoints.read_hf_folder(folder)
    assert config == {"model_type": "x"}
    assert json.loads((folder / "config.json").read_text()) == config
    np.testing.assert_array_equal(read["a.weight"], tensors["a.weight"])
    np.testing.assert_array_equal(
        load_file(str(folder / "model.safetensors"))["a.weight"], read["a.weight"]
    )
    assert checkpoints.config_file(folder) == folder / "config.json"
    modes = {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()}  # no partial file left
    assert modes["model.safetensors"] == modes["config.json"] and len(modes) == 2


def test_dense_rows_load_a_torch_linear_and_export_it_back():
    linear = torch.nn.Linear(3, 4)
    layer = keras.layers.Dense(4)
    layer.build((None, 3))
    table = checkpoints.dense(layer, "proj")
    state = {name: value.detach().numpy() for name, value in linear.state_dict().items()}
    checkpoints.assign(table, {f"proj.{name}": value for name, value in state.items()})
    x = np.random.default_rng(0).normal(size=(2, 3)).astype("float32")
    expected = linear(torch.from_numpy(x)).detach().numpy()
    assert np.max(np.abs(keras.ops.convert_to_numpy(layer(x)) - expected)) < 1e-6
    exported = checkpoints.exported_tensors(table, "model.")
    np.testing.assert_allclose(exported["model.proj.weight"], state["weight"])


def test_assignment_is_all_or_nothing_and_names_what_is_wrong():
    layer = keras.layers.Dense(4)
    layer.build((None, 3))
    before = [keras.ops.convert_to_numpy(w) for w in layer.weights]
    table = checkpoints.dense(layer, "proj")
    with pytest.raises(UserInputError, match=r"lacks 1 .*proj\.bias"):
        checkpoints.assign(table, {"proj.weight": np.zeros((4, 3))})
    with pytest.raises(UserInputError, match=r"proj\.weight \(3, 4\)"):
        checkpoints.assign(table, {"proj.weight": np.ones((3, 4)), "proj.bias": np.ones(4)})
    for old, new in zip(before, layer.weights, strict=True):
        np.testing.assert_array_equal(old, keras.ops.convert_to_numpy(new))


def test_bad_folders_and_values_are_named(tmp_path):
    with pytest.raises(checkpoints.CheckpointFileNotFound, match="folder"):
        checkpoints.read_hf_folder(tmp_path / "missing")
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(checkpoints.CheckpointError, match="JSON object"):
        checkpoints.read_hf_folder(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(checkpoints.CheckpointFileNotFound, match="model.safetensors"):
        checkpoints.read_hf_folder(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"truncated")
    with pytest.raises(checkpoints.CheckpointError, match="cannot read the weights"):
        checkpoints.read_hf_folder(tmp_path)
    # A pickle that would run code: refused in one line (torch's own message ran to six).
    import os
    import pickle

    class Runs:
        def __reduce__(self):
            return (os.system, ("echo ran",))

    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps(Runs()))
    with pytest.raises(checkpoints.CheckpointError, match="refused: the pickle holds") as info:
        checkpoints.read_hf_folder(tmp_path)
    assert "\n" not in str(info.value)
    with pytest.raises(UserInputError, match="vocab_size"):
        checkpoints.positive_ints({"vocab_size": 0}, ["vocab_size"])
    with pytest.raises(UserInputError, match="hidden_act"):
        checkpoints.activation({"hidden_act": "swish7"}, "hidden_act")
    assert checkpoints.activation({}, "hidden_act") == "gelu"


def test_warn_unused_lists_the_first_names():
    with pytest.warns(UserWarning, match=r"not used by Dense: a0, a1.*\(13 in all\)"):
        checkpoints.warn_unused(keras.layers.Dense, [f"a{i}" for i in range(13)])
