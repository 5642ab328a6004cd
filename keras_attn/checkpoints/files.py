"""Checkpoint folders on disk: Hugging Face's `config.json` with `model.safetensors` or
`pytorch_model.bin`, read into NumPy and written back; errors that name the file."""

import json
import math
import pathlib
import re

import numpy as np

from keras_attn.checkpoints.checkpoint_errors import CheckpointError, CheckpointFileNotFound
from keras_attn.checkpoints.sizes import check_sizes, safetensors_shapes


def read_json(file):
    """A JSON object from `file`, or a `CheckpointError` naming it (also for `NaN` and
    `Infinity`, which Python's `json` reads but JSON has not: a norm's epsilon or a RoPE
    base of NaN would make every answer NaN)."""

    def not_json(constant):
        raise json.JSONDecodeError(f"{constant} is not JSON", constant, 0)

    def finite(text):
        value = float(text)
        return value if math.isfinite(value) else not_json(text)  # 1e999

    try:
        text = pathlib.Path(file).read_text(encoding="utf-8")
        config = json.loads(text, parse_constant=not_json, parse_float=finite)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{file}: not a JSON configuration ({error})") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{file}: expected a JSON object of configuration keys")
    return config


def read_weights(file, read):
    """`read(file)`, with any parser's error turned into one that names the file."""
    try:
        return read(file)
    except (ImportError, CheckpointError):
        raise
    except Exception as error:  # each format's parser has its own exception types
        if type(error).__name__ == "UnpicklingError":  # torch.load(weights_only=True)'s
            raise CheckpointError(
                f"{file}: refused: the pickle holds objects other than tensors, which "
                "could run code when loaded (save its state dict as model.safetensors "
                "from a copy you trust)"
            ) from None
        first = (str(error).strip().splitlines() or [""])[0][:200]  # one line, as promised
        raise CheckpointError(
            f"{file}: cannot read the weights ({type(error).__name__}: {first}); "
            "the file may be truncated or not a checkpoint"
        ) from None


def read_hf_folder(path):
    """`(config, tensors)` of a Hugging Face folder: `config.json` and name -> NumPy
    array (torch's names and layouts: Linear weights `(out, in)`)."""
    path = pathlib.Path(path)
    if not path.is_dir():
        raise CheckpointFileNotFound(f"Expected a checkpoint folder. Received: path={str(path)!r}")
    if not (path / "config.json").exists():
        raise CheckpointFileNotFound(
            f"Expected config.json (Hugging Face layout) in {path}. "
            f"Found: {sorted(p.name for p in path.iterdir())}"
        )
    config = read_json(path / "config.json")
    if (path / SHARD_INDEX).exists() and not (path / "model.safetensors").exists():
        return config, _read_shards(path, config)
    if (path / "model.safetensors").exists():
        from safetensors.numpy import load_file

        weights = path / "model.safetensors"
        # The sizes are checked against the header's shapes before a tensor is read.
        check_sizes(config, read_weights(weights, safetensors_shapes), "config.json", weights)
        tensors = read_weights(weights, lambda file: load_file(str(file)))
    elif (path / "pytorch_model.bin").exists():
        weights = path / "pytorch_model.bin"
        tensors = read_weights(weights, _read_torch_bin)  # a pickle: no header to read first
        shapes = {name: value.shape for name, value in tensors.items()}
        check_sizes(config, shapes, "config.json", weights)
    else:
        raise CheckpointFileNotFound(
            f"Found config.json but no model.safetensors or pytorch_model.bin in {path}"
        )
    return config, tensors


SHARD_INDEX = "model.safetensors.index.json"
_SHARD_NAME = re.compile(r"^model-\d{1,5}-of-\d{1,5}\.safetensors$")


def _read_shards(path, config):
    """The tensors of sharded safetensors (`model.safetensors.index.json`'s
    `weight_map`: tensor -> shard): the index checked (shard names of the form
    `model-00001-of-00002.safetensors`, in the folder; each tensor in the shard it
    names, once), every shard's header read and the sizes checked before a tensor is."""
    from safetensors.numpy import load_file

    index = read_json(path / SHARD_INDEX)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{path / SHARD_INDEX}: expected a non-empty weight_map object")
    shards = sorted(set(weight_map.values()), key=str)
    for shard in shards:
        if not isinstance(shard, str) or not _SHARD_NAME.match(shard):
            raise CheckpointError(
                f"{path / SHARD_INDEX}: expected shard names model-NNNNN-of-NNNNN.safetensors; "
                f"received {shard!r:.100}"
            )
        if not (path / shard).is_file():
            raise CheckpointFileNotFound(f"{path}: the shard {shard} the index names is missing")
    shapes = {}
    for shard in shards:
        found = read_weights(path / shard, safetensors_shapes)
        listed = {name for name, where in weight_map.items() if where == shard}
        if set(found) != listed or set(found) & set(shapes):
            raise CheckpointError(
                f"{path / shard}: its tensors differ from what {SHARD_INDEX} says it holds"
            )
        shapes.update(found)
    check_sizes(config, shapes, "config.json", path / SHARD_INDEX)
    tensors = {}
    for shard in shards:
        tensors.update(read_weights(path / shard, lambda file: load_file(str(file))))
    return tensors


def _read_torch_bin(file):
    try:
        import torch
    except ImportError as error:
        raise ImportError(
            f"Reading {file.name} needs torch (`pip install torch`); a model.safetensors "
            "file does not."
        ) from error
    state = torch.load(str(file), map_location="cpu", weights_only=True)
    return {
        name: value.float().numpy() if value.is_floating_point() else value.numpy()
        for name, value in state.items()
    }


def config_file(path):
    """The configuration file of a checkpoint folder (Hugging Face's or TF1 BERT's)."""
    path = pathlib.Path(path)
    return path / ("config.json" if (path / "config.json").exists() else "bert_config.json")


def write_hf_folder(folder, config, tensors):
    """Writes `config.json` and `model.safetensors` (float32, contiguous) into `folder`
    (created; the weights written whole or not at all, mode as any new file's); returns
    it as a `pathlib.Path`."""
    from safetensors.numpy import save_file

    from keras_attn.atomic_files import replaced_on_success

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {name: np.ascontiguousarray(value) for name, value in tensors.items()}
    # Whole or not at all, and with the mode of the other files (safetensors writes 0600).
    with replaced_on_success(folder / "model.safetensors") as partial:
        save_file(tensors, str(partial), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return folder
