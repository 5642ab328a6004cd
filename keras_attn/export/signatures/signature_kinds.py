"""Which signatures a model gets: the kind its family declares, no dispatch chain.

Each model family declares, in its registry entry (`Family.signatures`), which kind of
signatures each of its classes serves (`"encoder"`, `"classifier"`, `"tagger"`,
`"span_qa"`, `"multiple_choice"`, `"masked_lm"`, `"entity_typing"`, `"language_model"`,
`"seq2seq"`). The signature
modules (`MODULES`) register one builder per kind with `@serves(kind, option=default,
...)`; `model_signatures` finds the kind of a model's nearest class and hands the
builder the options it declared (any other option is refused, naming its own). A new
family whose models fit a kind declares it and edits nothing here.
"""

import importlib

from keras_attn.models import registry

# The signature modules, each registering its builders when imported.
MODULES = (
    "backbone",
    "classifier",
    "fill_mask",
    "generation",
    "mention_typing",
    "multiple_choice",
    "span_qa",
    "tagger",
)
_ENTRIES = {}  # signature kind -> (builder, {option: default})


def serves(kind, **options):
    """Registers `builder(model, tokenizer, **options) -> Signatures` for the models
    whose family declares them of `kind` (`Family.signatures`)."""

    def register(builder):
        _ENTRIES[kind] = (builder, options)
        return builder

    return register


def _entry(model):
    """`(builder, options)` of the signature kind that `model`'s family declares for
    its nearest class, or `None`."""
    for module in MODULES:
        importlib.import_module(f"keras_attn.export.signatures.{module}")  # registers, once
    kinds = {cls: kind for family in registry.families() for cls, kind in family.signatures.items()}
    return _ENTRIES.get(registry.lookup(model, kinds))


def signature_kind(model):
    """The kind of signatures `model`'s family declares for it (`"classifier"`, ...),
    or `None`."""
    kinds = {cls: kind for family in registry.families() for cls, kind in family.signatures.items()}
    return registry.lookup(model, kinds)


def export_options(model):
    """The export options (name -> default) of `model`'s signatures, or `None` for a
    model that has none (what `model_signatures` would refuse)."""
    entry = _entry(model)
    return None if entry is None else dict(entry[1])


def check_exportable(model):
    """`(builder, options)` of `model`'s signatures; a TypeError names the classes that
    have signatures when `model` is none of them."""
    entry = _entry(model)
    if entry is None:
        names = ", ".join(
            sorted(cls.__name__ for family in registry.families() for cls in family.signatures)
        )
        raise TypeError(f"Expected one of {names}. Received: {type(model).__name__}")
    return entry


def model_signatures(model, tokenizer, **options):
    """The `Signatures` `export_saved_model` writes for `model` (see there)."""
    builder, defaults = check_exportable(model)
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ValueError(
            f"`{unknown[0]}` is not an export option of a {type(model).__name__}. "
            f"Expected some of {sorted(defaults)}. Received: {sorted(options)}"
        )
    return builder(model, tokenizer, **{**defaults, **options})
