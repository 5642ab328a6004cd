"""keras_attn: attention layers with pluggable scoring, for Keras 3 on TensorFlow."""

import os

# Keras 3 picks its backend at first import; keras_attn is built for TensorFlow.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn import (
    data,  # noqa: E402
    export,  # noqa: E402
    layers,  # noqa: E402
    models,  # noqa: E402
    training,  # noqa: E402
    visualize,  # noqa: E402
)

__version__ = "0.1.0"

__all__ = ["data", "export", "layers", "models", "training", "visualize", "__version__"]
