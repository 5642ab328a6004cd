"""The one place a public name is declared.

`keras_attn_export` registers a class for Keras serialization under
`package="keras_attn"` and records the public path it is exported under, so a test
can check that what the sub-packages re-export and what was declared agree.
"""

PACKAGE = "keras_attn"

# Public path (e.g. "keras_attn.layers.MultiHeadAttention") -> exported symbol.
EXPORTED = {}


def keras_attn_export(path, serializable=None):
    """Declares `symbol` public under `path` and registers it for serialization.

    Args:
        path: the dotted public path, e.g. `"keras_attn.layers.DotScore"`.
        serializable: register with Keras serialization (`None`: classes only;
            `True` for functions a config may name, such as activations).

    Example:

    >>> import keras
    >>> from keras_attn.api_export import keras_attn_export
    >>> @keras_attn_export("keras_attn.layers.Example")
    ... class Example(keras.layers.Layer):
    ...     pass
    >>> EXPORTED.pop("keras_attn.layers.Example").__name__
    'Example'
    """
    if not isinstance(path, str) or not path.startswith(PACKAGE + "."):
        raise ValueError(
            f"Expected a dotted path starting with '{PACKAGE}.'. Received: path={path!r}"
        )

    def decorator(symbol):
        if path in EXPORTED and EXPORTED[path] is not symbol:
            raise ValueError(f"Public name declared twice: {path}")
        if serializable or (serializable is None and isinstance(symbol, type)):
            import keras  # only what Keras serializes needs it (a plain config does not)

            keras.saving.register_keras_serializable(package=PACKAGE)(symbol)
        EXPORTED[path] = symbol
        return symbol

    return decorator
