"""Command-line strings as bytes and as printable text (the predict commands')."""


def as_bytes(value):
    """Command-line strings -> their original bytes (undecodable ones were kept as
    surrogates by Python), nested lists too."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, bytes):
        return value
    return [as_bytes(v) for v in value]


def shown(text):
    """A command-line string as it can be printed (undecodable bytes as U+FFFD)."""
    return as_bytes(text).decode("utf-8", "replace")


def classified(label, probabilities, text):
    """One classified text as every command prints it: `label  p=0.892  text` (the
    label's probability), so the main job, `predict` and `predict --input` agree."""
    label = label.decode("utf-8", "replace") if isinstance(label, bytes) else str(label)
    return f"{label:>10}  p={float(max(probabilities)):.3f}  {shown(text)}"
