"""Which signatures each model family gets: one entry per family, no dispatch chain.

A family's module registers its builder with `@serves(ModelClass, option=default,
...)`; `model_signatures` imports the `FAMILIES`, finds the entry for a model and
hands it the options it declared (any other option is refused, naming the family's
own).
"""

import importlib

# The family modules, each registering its builder when imported.
FAMILIES = ("backbone", "classifier", "generation", "multiple_choice", "span_qa", "tagger")
_ENTRIES = []  # (model class, builder, {option: default})


def serves(model_class, **options):
    """Registers `builder(model, tokenizer, **options) -> Signatures` for `model_class`."""

    def register(builder):
        _ENTRIES.append((model_class, builder, options))
        return builder

    return register


def _registered():
    for family in FAMILIES:
        importlib.import_module(f"keras_attn.export.signatures.{family}")  # registers, once
    return _ENTRIES


def exportable(model):
    """Whether some family serves `model` (what `model_signatures` would accept)."""
    return any(isinstance(model, entry[0]) for entry in _registered())


def model_signatures(model, tokenizer, **options):
    """The `Signatures` `export_saved_model` writes for `model` (see there)."""
    _registered()
    for model_class, builder, defaults in _ENTRIES:
        if isinstance(model, model_class):
            unknown = sorted(set(options) - set(defaults))
            if unknown:
                raise ValueError(
                    f"`{unknown[0]}` is not an export option of a {type(model).__name__}. "
                    f"Expected some of {sorted(defaults)}. Received: {sorted(options)}"
                )
            return builder(model, tokenizer, **{**defaults, **options})
    names = ", ".join(entry[0].__name__ for entry in _ENTRIES)
    raise TypeError(f"Expected one of {names}. Received: {type(model).__name__}")
