"""keras_attn: attention layers with pluggable scoring, for Keras 3 (TensorFlow, JAX, PyTorch).

The sub-packages load when first used (`from keras_attn.layers import ...`, or
`keras_attn.models`), so `import keras_attn` and the `keras-attn` command start
without TensorFlow. Importing `keras_attn.layers` or `keras_attn.models` registers
their classes with Keras's serialization: do that before `keras.saving.load_model`
on a file that holds them.
"""

import importlib
import os

from keras_attn import native_logs

# Keras 3 picks its backend at first import from KERAS_BACKEND; unset, TensorFlow (as
# Keras's own default). The layers and models also run on "jax" and "torch"; the data
# pipelines, training commands and SavedModel export need TensorFlow.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# TensorFlow's C++ log lines (oneDNN, CUDA probing, CPU features) stay off a user's
# terminal unless they set TF_CPP_MIN_LOG_LEVEL themselves (see native_logs).
native_logs.quiet_tensorflow_start()

__version__ = "0.1.0"

_SUBPACKAGES = ("data", "evaluation", "export", "layers", "models", "training", "visualize")

__all__ = [*_SUBPACKAGES, "__version__"]


def __getattr__(name):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"keras_attn.{name}")
    raise AttributeError(f"module 'keras_attn' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBPACKAGES))
