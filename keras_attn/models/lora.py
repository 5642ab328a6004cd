"""LoRA (Hu et al., 2021) for every model of the package: Keras's own low-rank
adapters in the attention's `Dense`/`EinsumDense` projections, the rest frozen;
adapters saved and loaded alone (keras-hub's names and `.lora.h5` files) and merged
into the kernels for export."""

import contextlib
import json
import math

import keras
import numpy as np

from keras_attn.argument_checks import check_positive_int, check_positive_number
from keras_attn.models.model_copies import rebuilt_from_config

# The paper's and keras-hub's choice: the attention's query and value projections.
DEFAULT_TARGETS = ("query", "value")
SUFFIX = ".lora.h5"
_FORMAT = "keras_attn.lora/1"


def _projections(model):
    """Every `Dense`, `EinsumDense` and `BlockDense` (a projection kept in GGUF's
    blocks) in `model`, once each, in a fixed order."""
    from keras_attn.layers import BlockDense

    kinds = (keras.layers.Dense, keras.layers.EinsumDense, BlockDense)
    return [
        layer for layer in model._flatten_layers(include_self=False) if isinstance(layer, kinds)
    ]


def _kept_in_blocks(layer):
    return hasattr(layer, "block_format")


def adapted_layers(model):
    """The layers of `model` whose LoRA is enabled, in a fixed order."""
    return [layer for layer in _projections(model) if layer.lora_enabled]


def _where(layer):
    """`layer`'s place, for messages: its kernel's path without the variable name."""
    return _kernel(layer).path.rsplit("/", 1)[0]


def _kernel(layer):
    """A projection's own kernel variable (with LoRA on, Keras's `kernel` property gives
    the kernel merged with the adapters, a tensor)."""
    kernel = getattr(layer, "_kernel", None)
    return layer.kernel if kernel is None else kernel


def _sides(layer):
    """A projection's kernel as a matrix: `(inputs, outputs)`."""
    if _kept_in_blocks(layer):  # its blocks hold the rows: (outputs, bytes)
        return layer.input_dim, int(np.prod(layer.units_shape))
    kernel = list(_kernel(layer).shape)
    return int(np.prod(kernel[:-1])), kernel[-1]


def _signature(layers, rank=None):
    """What an adapter file must match: each adapted layer's name, class, A/B shapes
    (given `rank`: the shapes rank-`rank` adapters of these layers would have, from
    their kernels, as Keras's `Dense`/`EinsumDense` make them, nothing allocated)."""

    def shapes(layer):
        if rank is None:
            return list(layer.lora_kernel_a.shape), list(layer.lora_kernel_b.shape)
        if _kept_in_blocks(layer):
            inputs, outputs = _sides(layer)
            return [inputs, rank], [rank, outputs]
        kernel = list(_kernel(layer).shape)
        return [*kernel[:-1], rank], [rank, kernel[-1]]

    return [[layer.name, type(layer).__name__, *shapes(layer)] for layer in layers]


class LoraMixin:
    """`enable_lora`, `save_lora_weights`, `load_lora_weights`, `lora_rank` and
    `merged_copy` for a model: as keras-hub's backbones, and on task models too."""

    def _lora_frozen_scope(self):
        """The part of the model LoRA freezes: a task model's backbone (its head,
        new for the task, keeps training), else the whole model."""
        backbone = getattr(self, "backbone", None)
        return self if backbone is None else backbone

    def enable_lora(self, rank, target_names=None, alpha=None):
        """Adds rank-`rank` adapters to the projections named `target_names` and
        freezes the rest (a task model's head keeps training).

        Each target's output becomes `x W + (alpha / rank) x A B` (Keras's LoRA in
        `Dense`/`EinsumDense`, ours in `BlockDense`, whose `W` stays in GGUF's blocks):
        `A` starts He-uniform, `B` at zero, so the outputs do not change until training
        moves `B`; `W` and the target's bias are frozen.

        Args:
            rank: the adapters' rank (a positive int; the paper and keras-hub: 4-16).
            target_names: the names of the layers to adapt (default: the attention's
                `"query"` and `"value"` projections in every block).
            alpha: the scale's numerator (default `rank`: scale 1).

        Raises:
            ValueError: a bad `rank` or `alpha`, a rank past the smaller side of
                every target's kernel (`LoRARankError`), targets that name no projection (the names
                there are listed), or LoRA already enabled.

        Example:

        >>> import tempfile, pathlib
        >>> from keras_attn.models import BertBackbone, BertClassifier
        >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=50), 2)
        >>> model.enable_lora(8)
        >>> sorted({w.path.split("/")[-2] for w in model.trainable_weights})
        ['logits', 'query', 'value']
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "sentiment.lora.h5"
        >>> model.save_lora_weights(path)
        >>> fresh = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=50), 2)
        >>> fresh.load_lora_weights(path)  # enables rank-8 LoRA on the same layers
        >>> fresh.lora_rank, model.merged_copy().lora_rank
        (8, None)
        """
        check_positive_int("rank", rank)
        check_positive_number("alpha", alpha, allow_none=True)
        targets = tuple(DEFAULT_TARGETS if target_names is None else target_names)
        if not targets or not all(isinstance(name, str) for name in targets):
            raise ValueError(
                "Expected `target_names` to be layer names (strings). "
                f"Received: target_names={target_names!r}"
            )
        if adapted_layers(self):
            raise ValueError(
                f"LoRA is already enabled in {self.name} (rank {self.lora_rank}); "
                "enable it once, on a model without adapters"
            )
        if not self.built:
            raise ValueError(f"Expected a built model; call {self.name} on a batch first.")
        chosen = [layer for layer in _projections(self) if layer.name in targets]
        if not chosen:
            names = sorted({layer.name for layer in _projections(self)})
            raise ValueError(
                f"`target_names` {list(targets)} name no Dense, EinsumDense or BlockDense "
                f"layer of {self.name}. Its projections: {names}"
            )
        widest = max(min(_sides(layer)) for layer in chosen)
        if rank > widest:  # past every kernel's smaller side, rank adds nothing
            raise LoRARankError(
                f"Expected `rank` <= {widest}, the smaller side of the adapted projections' "
                f"kernels (past it an adapter adds weights, not expressiveness). Received: "
                f"rank={rank}"
            )
        for layer in self._lora_frozen_scope()._flatten_layers(include_self=False):
            layer.trainable = False
        for layer in chosen:
            layer.trainable = True
            layer.enable_lora(rank, lora_alpha=alpha)
            if layer.bias is not None:
                layer.bias.trainable = False  # only the adapters train

    @property
    def lora_rank(self):
        """The adapters' rank, or None without LoRA."""
        layers = adapted_layers(self)
        return layers[0].lora_rank if layers else None

    def save_lora_weights(self, filepath):
        """Writes the adapters alone (not the frozen weights) to `filepath`, a
        `.lora.h5` file, with what `load_lora_weights` checks: the rank, the scale,
        the targets and each adapted layer's shapes."""
        import h5py

        from keras_attn.atomic_files import replaced_on_success

        layers = self._adapters_or_error("save")
        _check_suffix(filepath)
        with replaced_on_success(filepath) as partial, h5py.File(partial, "w") as f:
            f.attrs["format"] = _FORMAT
            f.attrs["model"] = type(self).__name__
            f.attrs["rank"] = layers[0].lora_rank
            f.attrs["alpha"] = layers[0].lora_alpha
            f.attrs["targets"] = json.dumps(sorted({layer.name for layer in layers}))
            f.attrs["signature"] = json.dumps(_signature(layers))
            f.attrs["paths"] = json.dumps([_where(layer) for layer in layers])
            for index, layer in enumerate(layers):
                group = f.create_group(f"{index:04d}")
                group["lora_kernel_a"] = keras.ops.convert_to_numpy(layer.lora_kernel_a)
                group["lora_kernel_b"] = keras.ops.convert_to_numpy(layer.lora_kernel_b)

    def load_lora_weights(self, filepath):
        """Loads adapters that `save_lora_weights` wrote into this model (enabling
        LoRA with the file's rank and targets if the model has none yet).

        The file is checked whole before the model changes: its rank, scale and
        targets, and each stored array's shape against the shape this model's layer
        gives it (from the layer's kernel: a rank the file claims is never allocated
        before it is known to fit, and is at most the kernels' smaller side). A
        refused file leaves the model as it was (no LoRA enabled, nothing frozen).

        Raises:
            ValueError: a file that is not a `.lora.h5` adapter file (damaged, or its
                attributes or arrays missing or malformed: named), or one made for
                another rank or another architecture (named).
        """
        _check_suffix(filepath)
        with _adapter_file(filepath) as (rank, alpha, targets, theirs, paths, model, stored):
            layers = adapted_layers(self)
            if layers and layers[0].lora_rank != rank:
                raise ValueError(
                    f"{filepath} holds rank-{rank} adapters; {self.name}'s have rank "
                    f"{layers[0].lora_rank}. Load it into a model with rank {rank} (or none)."
                )
            chosen = layers or [layer for layer in _projections(self) if layer.name in targets]
            widest = max((min(_sides(layer)) for layer in chosen), default=0)
            if chosen and rank > widest:  # past a kernel's smaller side, rank adds nothing
                raise ValueError(
                    f"{filepath} says rank {rank}; the layers it adapts in {self.name} "
                    f"allow at most {widest} (the smaller side of their kernels)"
                )
            ours = _signature(chosen, rank)
            if theirs != ours or not chosen:
                raise ValueError(_mismatch(filepath, model, theirs, paths, self, ours, chosen))
            for index, (a, b) in enumerate(stored):  # the arrays as stored, not as said
                if [list(a.shape), list(b.shape)] != ours[index][2:]:
                    raise ValueError(
                        f"{filepath} is damaged: its arrays {index:04d} have shapes "
                        f"{[list(a.shape), list(b.shape)]}; its signature says "
                        f"{ours[index][2:]}"
                    )
                if a.dtype.kind != "f" or b.dtype.kind != "f":
                    raise ValueError(
                        f"{filepath} is damaged: its arrays {index:04d} hold {a.dtype} and "
                        f"{b.dtype}, not floating-point weights"
                    )
            arrays = _values(filepath, stored)  # their shapes known to be this model's
        if not layers:
            self.enable_lora(rank, targets, alpha=alpha)
            layers = adapted_layers(self)
        for layer, (a, b) in zip(layers, arrays, strict=True):
            layer.lora_kernel_a.assign(a)
            layer.lora_kernel_b.assign(b)

    def merged_copy(self):
        """A new model of the same class and configuration whose kernels hold the
        adapters merged in (`W + (alpha / rank) A B`): no adapter variables, no LoRA
        ops, the outputs of this model. What export serves; `self` is unchanged."""
        kept = sorted(
            {layer.name for layer in self._adapters_or_error("merge") if _kept_in_blocks(layer)}
        )
        if kept:
            raise ValueError(
                f"Merging adapters into projections kept in GGUF's blocks ({kept}) would "
                "quantize them again: not supported. Serve the model with its adapters, or "
                "load the file without `keep_blocks`, fine-tune and merge that"
            )
        config = keras.saving.serialize_keras_object(self)
        config.pop("compile_config", None)
        copy = rebuilt_from_config(self, config)
        ours, theirs = _variable_owners(self), _variable_owners(copy)
        if [type(layer) for layer in ours] != [type(layer) for layer in theirs]:
            raise ValueError(f"{self.name} did not rebuild as the same layers from its config")
        for source, target in zip(ours, theirs, strict=True):
            store = {}
            source.save_own_variables(store)  # Dense/EinsumDense: the kernel merged
            target.load_own_variables(store)
        return copy

    def _adapters_or_error(self, verb):
        layers = adapted_layers(self)
        if not layers:
            raise ValueError(
                f"{self.name} has no LoRA adapters to {verb}; call enable_lora(rank) first"
            )
        return layers


def _variable_owners(model):
    """The layers of `model` (itself included) that own variables, in order (a
    preprocessor's tokenizer, which owns none, may or may not be tracked in a rebuilt
    copy)."""
    return [
        layer
        for layer in model._flatten_layers(include_self=True)
        if layer._trainable_variables or layer._non_trainable_variables
    ]


def merged_for_export(model):
    """`model` itself, or its `merged_copy()` when it holds LoRA adapters."""
    return model.merged_copy() if getattr(model, "lora_rank", None) else model


@contextlib.contextmanager
def _adapter_file(filepath):
    """Yields `(rank, alpha, targets, signature, paths, model class, [(A, B) datasets])`
    of an open adapter file, every attribute checked for its kind; the datasets' values
    are not read (the caller checks their shapes first: a declared shape costs nothing
    to state). A `ValueError` names the file and what is wrong, never h5py's or JSON's
    own error."""
    import h5py

    try:
        f = h5py.File(filepath, "r")
    except OSError as error:
        raise ValueError(f"{filepath} is not a readable .lora.h5 file ({error})") from None
    with f:
        if f.attrs.get("format") != _FORMAT:
            raise ValueError(f"{filepath} is not a keras_attn LoRA adapter file")
        try:
            rank, alpha = int(f.attrs["rank"]), float(f.attrs["alpha"])
            targets, signature, paths = (
                json.loads(f.attrs[key]) for key in ("targets", "signature", "paths")
            )
            model = str(f.attrs["model"])
            if not (
                isinstance(targets, list)
                and all(isinstance(t, str) for t in targets)
                and isinstance(signature, list)
                and isinstance(paths, list)
                and len(paths) == len(signature)
                and rank >= 1
                and math.isfinite(alpha)
                and alpha > 0
            ):
                raise ValueError(
                    f"rank {rank} or alpha {alpha}, or targets, signature or paths malformed"
                )
            groups = [f"{index:04d}" for index in range(len(signature))]
            if sorted(f.keys()) != groups:
                raise ValueError(f"arrays {sorted(f.keys())[:4]}, expected {len(groups)}")
            stored = [(f[g]["lora_kernel_a"], f[g]["lora_kernel_b"]) for g in groups]
        except (KeyError, TypeError, ValueError, OSError) as error:
            raise ValueError(f"{filepath} is a damaged .lora.h5 file ({_first(error)})") from None
        yield rank, alpha, targets, signature, paths, model, stored


def _values(filepath, stored):
    """The arrays of `stored` datasets, read; a damaged one named."""
    try:
        return [(a[()], b[()]) for a, b in stored]
    except (OSError, TypeError, ValueError) as error:
        raise ValueError(f"{filepath} is a damaged .lora.h5 file ({_first(error)})") from None


def _first(error):
    return (str(error).splitlines() or [type(error).__name__])[0][:200]


def _check_suffix(filepath):
    if not str(filepath).endswith(SUFFIX):
        raise ValueError(
            f"Expected an adapter file name ending in {SUFFIX!r} (keras-hub's). "
            f"Received: filepath={str(filepath)!r}"
        )


def _mismatch(filepath, their_model, theirs, paths, model, ours, layers):
    """The message for adapters made for another architecture: the first difference."""
    if not layers:
        return (
            f"{filepath} was made for another architecture ({their_model}): its targets "
            f"name no projection of {model.name}"
        )
    if len(theirs) != len(ours):
        return (
            f"{filepath} was made for another architecture ({their_model}): it adapts "
            f"{len(theirs)} layers, {model.name} has {len(ours)} adapted layers"
        )
    index = next(i for i, (a, b) in enumerate(zip(theirs, ours, strict=True)) if a != b)
    return (
        f"{filepath} was made for another architecture ({their_model}): its layer "
        f"{paths[index]} has adapters {theirs[index][2:]} (A, B shapes), "
        f"{model.name}'s {_where(layers[index])} has {ours[index][2:]}"
    )


class LoRARankError(ValueError):
    """A LoRA rank past the smaller side of every target projection's kernel."""
