"""What the TensorFlow-only parts say when TensorFlow is missing (internal).

`keras_attn.layers` and `keras_attn.models` run on every Keras 3 backend with Keras
and NumPy alone (`pip install keras-attn`). The data pipelines (tf.data,
tensorflow-text), the SavedModel export, the TF1 checkpoint reader and the training
commands (tf.distribute) need TensorFlow: `pip install 'keras-attn[tensorflow]'`.
"""

TENSORFLOW_INSTALL = "pip install 'keras-attn[tensorflow]'"


def require_tensorflow(what):
    """Imports and returns `tensorflow` for `what`, or raises an ImportError that
    names `what` and the install command.

    Example:

    >>> from keras_attn.requirements import require_tensorflow
    >>> require_tensorflow("keras_attn.export").__name__
    'tensorflow'
    """
    try:
        import tensorflow
    except ImportError as error:
        raise ImportError(
            f"{what} needs TensorFlow, which cannot be imported here ({error}). Install it "
            f"with: {TENSORFLOW_INSTALL}. The layers and models (keras_attn.layers, "
            "keras_attn.models) run without it, on JAX and PyTorch."
        ) from error
    return tensorflow
