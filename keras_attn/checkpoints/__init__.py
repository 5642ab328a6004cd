"""Family-neutral checkpoint machinery: reading and writing Hugging Face folders, the
name-and-transform tables' parts, all-or-nothing assignment.

Each model family keeps only its own table (checkpoint name -> variable, with the
`Transform` between the torch layout and ours) and its configuration keys, in its
own folder (`models/bert/checkpoint_layouts.py`, `models/gpt/gpt2_checkpoint.py`,
`models/xlnet/xlnet_checkpoint.py`).
"""

from keras_attn.checkpoints.assignment import assign, exported_tensors, warn_unused
from keras_attn.checkpoints.config_keys import (
    ACTIVATIONS,
    activation,
    hf_activation,
    positive_floats,
    positive_ints,
)
from keras_attn.checkpoints.files import (
    CheckpointError,
    CheckpointFileNotFound,
    config_file,
    read_hf_folder,
    read_json,
    read_weights,
    write_hf_folder,
)
from keras_attn.checkpoints.transforms import (
    BIAS,
    IDENTITY,
    LINEAR,
    Bias,
    Linear,
    Transform,
    dense,
    norm,
)

__all__ = [
    "ACTIVATIONS",
    "BIAS",
    "Bias",
    "CheckpointError",
    "CheckpointFileNotFound",
    "IDENTITY",
    "LINEAR",
    "Linear",
    "Transform",
    "activation",
    "assign",
    "config_file",
    "dense",
    "exported_tensors",
    "hf_activation",
    "norm",
    "positive_floats",
    "positive_ints",
    "read_hf_folder",
    "read_json",
    "read_weights",
    "warn_unused",
    "write_hf_folder",
]
