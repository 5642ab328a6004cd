"""Argument checks and small helpers shared by the layers (internal)."""


def check_positive_int(name, value, allow_none=False):
    """Raises a ValueError naming `name` unless `value` is a positive int (or None)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        expected = "a positive integer or None" if allow_none else "a positive integer"
        raise ValueError(f"Expected `{name}` to be {expected}. Received: {name}={value!r}")


def check_positive_number(name, value):
    """Raises a ValueError naming `name` unless `value` is a number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"Expected `{name}` to be a positive number. Received: {name}={value!r}")


def check_rate(name, value):
    """Raises a ValueError naming `name` unless `value` is in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"Expected `{name}` in [0, 1). Received: {name}={value!r}")


def clone_initializer(initializer):
    """A new initializer of the same config: sub-layers given one seeded initializer
    object would otherwise draw identical kernels."""
    return initializer.__class__.from_config(initializer.get_config())
