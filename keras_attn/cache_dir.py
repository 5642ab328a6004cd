"""Where keras_attn keeps what it learns or checks once and reuses (on the ground floor:
imports nothing of keras_attn, nor TensorFlow)."""

import os
import pathlib


def default_cache_dir():
    """`$KERAS_ATTN_CACHE`, else `~/.cache/keras_attn` (`$XDG_CACHE_HOME` respected):
    vocabularies the training commands learn, GGUF metadata read once, the marks of hub
    downloads whose checksums were checked."""
    if os.environ.get("KERAS_ATTN_CACHE"):
        return pathlib.Path(os.environ["KERAS_ATTN_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "keras_attn"
