"""Argument checks every part of the package calls (ground floor: imports nothing of ours).

Each raises a `ValueError` naming the argument, what was expected and what was
received (Keras's wording: "Expected `name` ... Received: name=...").
"""


def check_positive_int(name, value, allow_none=False):
    """Raises a ValueError naming `name` unless `value` is a positive int (or None)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        expected = "a positive integer or None" if allow_none else "a positive integer"
        raise ValueError(f"Expected `{name}` to be {expected}. Received: {name}={value!r}")


def check_non_negative_int(name, value):
    """Raises a ValueError naming `name` unless `value` is an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Expected `{name}` to be an integer >= 0. Received: {name}={value!r}")


def check_positive_number(name, value, allow_none=False):
    """Raises a ValueError naming `name` unless `value` is a number > 0 (or None)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"Expected `{name}` to be a positive number. Received: {name}={value!r}")


def check_key_value_heads(num_key_value_heads, num_heads):
    """Raises a ValueError unless `num_key_value_heads` is None or a positive int
    dividing `num_heads` (grouped-query attention's groups)."""
    check_positive_int("num_key_value_heads", num_key_value_heads, allow_none=True)
    if num_key_value_heads is not None and num_heads % num_key_value_heads:
        raise ValueError(
            "Expected `num_key_value_heads` to divide `num_heads` (each key/value head "
            f"serves num_heads // num_key_value_heads query heads). Received: "
            f"num_key_value_heads={num_key_value_heads}, num_heads={num_heads}"
        )


def check_rate(name, value):
    """Raises a ValueError naming `name` unless `value` is in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"Expected `{name}` in [0, 1). Received: {name}={value!r}")


def check_output_shape(output_shape):
    """`output_shape` (None, a positive int or a tuple of them) as a tuple or None;
    anything else raises a ValueError naming it."""
    if output_shape is None:
        return None
    shape = (output_shape,) if isinstance(output_shape, int) else output_shape
    try:
        shape = tuple(shape)
    except TypeError:
        shape = None
    if not shape or not all(isinstance(d, int) and d > 0 for d in shape):
        raise ValueError(
            "Expected `output_shape` to be a positive int or a tuple of positive ints. "
            f"Received: output_shape={output_shape!r}"
        )
    return shape
