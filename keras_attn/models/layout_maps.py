"""Layout maps for `keras.distribution.ModelParallel`, derived from a model's own layers.

keras-hub writes each backbone's `get_layout_map` as a fixed list of path regexes
(five decoder families have one); here every model of the package has one, read off
the model itself. Each variable gets a *role* from the layer that owns it:

- `"column"` and `"row"`: a projection's kernel, split Megatron-style (Shoeybi et
  al., 2019). A column kernel is split along an output axis (the attention's query,
  key and value split by heads, the feed-forward's first kernel by its units), the
  row kernel that follows along an input axis (the attention's output projection by
  heads, the feed-forward's second kernel by its units), so that a block's two
  matmuls need one all-reduce between them. A `Dense` kernel is a column unless its
  parent layer names it a row (`layout_roles`); an `EinsumDense`'s input and output
  axes are read off its equation, and one that merges axes (the attention's output:
  heads and head size in, hidden out) is a row unless its parent says otherwise.
- `"table"`: an embedding table `(rows, hidden)`, split along its longer axis (the
  vocabulary of a token table, the hidden axis of a segment or short position table).
- `"replicated"`: norms, biases and any other vector or scalar, per-head biases, seed
  states, LoRA adapters.

Our layers declare the roles of their own variables of two axes or more, and of their
sub-layers where the default does not fit, in a class attribute, `layout_roles`
(`{"feedforward_output_dense": "row"}`); Keras's layers (`Dense`, `EinsumDense`,
`Embedding`, `ReversibleEmbedding`, the normalisations) have theirs here. A variable of
no rule raises a `ValueError` naming it: a new weight cannot be replicated by accident.

The model axis is split first; the data axis (`data_parallel_dim_name`) then splits
another axis of the same kernels and tables (fully sharded data parallelism, as
keras-hub's maps do), so a `(2, 4)` mesh keeps an eighth of each large kernel per
device. An axis whose size the mesh axis does not divide falls back to the next one
in the role's order (12 heads over 8 devices: the head size instead), and a variable
with no such axis stays whole.
"""

import contextlib
import functools
import random
import re
import types

import keras
import numpy as np

from keras_attn.api_export import keras_attn_export

COLUMN, ROW, TABLE, REPLICATED = "column", "row", "table", "replicated"
ROLES = (COLUMN, ROW, TABLE, REPLICATED)

_PROJECTIONS = (keras.layers.Dense, keras.layers.EinsumDense)
_NORMS = (
    keras.layers.LayerNormalization,
    keras.layers.RMSNormalization,
    keras.layers.BatchNormalization,
)
_EMBEDDINGS = (keras.layers.Embedding,)  # ReversibleEmbedding is an Embedding
# A recurrent cell's kernels are read at every step: split, each step would gather them.
_RECURRENT_CELLS = (keras.layers.LSTMCell, keras.layers.GRUCell, keras.layers.SimpleRNNCell)
# Convolutions (ELMo's character CNN): small kernels, whole on every device.
_CONVOLUTIONS = (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)
# Keras's layers: variable name -> role (None: the kernel's, from the parent layer).
_KERAS_ROLES = {
    "kernel": None,
    "bias": REPLICATED,
    "lora_kernel_a": REPLICATED,
    "lora_kernel_b": REPLICATED,
}


def _kernel_axes(layer, variable):
    """`(input axes, output axes)` of a kernel: the axes it contracts with the layer's
    input, and the axes it carries to the output."""
    if isinstance(layer, keras.layers.EinsumDense):
        operands, output = layer.equation.split("->")
        inputs, kernel = operands.split(",")
        contracted = [axis for axis, letter in enumerate(kernel) if letter in inputs]
        carried = [axis for axis, letter in enumerate(kernel) if letter in output]
        return contracted, [axis for axis in carried if axis not in contracted]
    rank = len(variable.shape)
    return list(range(rank - 1)), [rank - 1]


def _own_variables(layer):
    """The variables `layer` itself creates (not its sub-layers'), seed states included."""
    own = list(layer._trainable_variables) + list(layer._non_trainable_variables)
    own += [generator.state for generator in getattr(layer, "_seed_generators", [])]
    return own


def _role(layer, variable, declared):
    """The role of `layer`'s own `variable`; `declared`: what `layer`'s parent says of
    it (a projection's `"column"`/`"row"`), or `None`."""
    name = variable.name
    if name == "seed_generator_state":
        return REPLICATED
    if isinstance(layer, _PROJECTIONS) and name in _KERAS_ROLES:
        if _KERAS_ROLES[name] or declared:
            return _KERAS_ROLES[name] or declared
        inputs, outputs = _kernel_axes(layer, variable)
        return ROW if len(inputs) > len(outputs) else COLUMN
    if isinstance(layer, (*_NORMS, *_RECURRENT_CELLS, *_CONVOLUTIONS)):
        return REPLICATED
    if isinstance(layer, _EMBEDDINGS):
        return {"embeddings": TABLE, "reverse_embeddings": COLUMN}.get(name)
    own = getattr(layer, "layout_roles", {}).get(name)
    return own or (REPLICATED if len(variable.shape) < 2 else None)


def sharding_roles(model):
    """`[(variable, role, input axes, output axes)]` for every variable of `model`, each
    once (a layer shared by several blocks, as ALBERT's, counts once).

    Raises:
        ValueError: a variable of no rule, named by its path and its layer's class.
    """
    found, seen = [], set()

    def walk(layer, declared):
        for variable in _own_variables(layer):
            if id(variable) in seen:
                continue
            seen.add(id(variable))
            role = _role(layer, variable, declared)
            if role not in ROLES:
                raise ValueError(
                    f"No layout rule for the variable {variable.path!r} {tuple(variable.shape)} "
                    f"of a {type(layer).__name__}: declare its role in the layer's "
                    f"`layout_roles` (one of {ROLES})"
                )
            inputs, outputs = _kernel_axes(layer, variable) if role in (COLUMN, ROW) else ([], [])
            found.append((variable, role, inputs, outputs))
        children = getattr(layer, "layout_roles", {})
        for child in layer._layers:
            walk(child, children.get(child.name))

    walk(model, None)
    return found


def _axes_in_order(shape, role, inputs, outputs):
    """The axes the model axis tries, in order, then the data axis's order."""
    if role == COLUMN:
        return outputs + inputs, inputs + outputs
    if role == ROW:
        return inputs + outputs, outputs + inputs
    longer_first = sorted(range(len(shape)), key=lambda axis: -shape[axis])
    return longer_first, longer_first[::-1]


def partition_spec(shape, role, inputs, outputs, axis_sizes):
    """The mesh axis name (or `None`) for each axis of a variable of `shape` and `role`.

    Args:
        shape: the variable's shape.
        role: one of `ROLES`.
        inputs, outputs: a kernel's input and output axes (`sharding_roles`).
        axis_sizes: `[(mesh axis name, size)]`, the model axis first: each takes the
            first axis in its order that it divides and that is not taken yet.

    Returns:
        A tuple as long as `shape`.

    Example:

    >>> from keras_attn.models.layout_maps import partition_spec
    >>> # a query kernel (hidden, heads, head_dim): 12 heads do not split 8 ways
    >>> partition_spec((768, 12, 64), "column", [0], [1, 2], [("model", 8), ("batch", 1)])
    (None, None, 'model')
    >>> partition_spec((768, 3072), "column", [0], [1], [("model", 4), ("batch", 2)])
    ('batch', 'model')
    """
    spec = [None] * len(shape)
    if role == REPLICATED:
        return tuple(spec)
    orders = _axes_in_order(shape, role, inputs, outputs)
    for (name, size), order in zip(axis_sizes, orders, strict=False):
        if size <= 1:
            continue
        for axis in order:
            if spec[axis] is None and shape[axis] % size == 0:
                spec[axis] = name
                break
    return tuple(spec)


def layout_map(model, device_mesh, model_parallel_dim_name="model", data_parallel_dim_name="batch"):
    """The `keras.distribution.LayoutMap` of `model` on `device_mesh` (see the module's
    docstring); replicated variables are left out (Keras replicates what no key names).
    """
    names = list(device_mesh.axis_names)
    for argument, name in (
        ("model_parallel_dim_name", model_parallel_dim_name),
        ("data_parallel_dim_name", data_parallel_dim_name),
    ):
        if name not in names:
            raise ValueError(
                f"Expected `{argument}` to name an axis of the device mesh {names}. "
                f"Received: {argument}={name!r}"
            )
    sizes = dict(zip(names, device_mesh.shape, strict=True))
    axis_sizes = [
        (model_parallel_dim_name, sizes[model_parallel_dim_name]),
        (data_parallel_dim_name, sizes[data_parallel_dim_name]),
    ]
    layouts = keras.distribution.LayoutMap(device_mesh)
    for variable, role, inputs, outputs in sharding_roles(model):
        spec = partition_spec(tuple(variable.shape), role, inputs, outputs, axis_sizes)
        if any(spec):
            # An exact key: LayoutMap tries a key as a regular expression only when no
            # key equals the path.
            layouts[re.escape(variable.path)] = spec
    return layouts


class _OnClassOrInstance:
    """A method bound to the instance it is read from, or to the class when read from
    the class (keras-hub calls `get_layout_map` on the class; ours also on a model)."""

    def __init__(self, function):
        self.__func__ = function
        functools.update_wrapper(self, function)

    def __get__(self, instance, owner=None):
        return types.MethodType(self.__func__, owner if instance is None else instance)


def class_layout_map(cls, device_mesh, model_parallel_dim_name, data_parallel_dim_name, size):
    """`layout_map` of `cls.from_size(size)`'s structure, its layer numbers read as any
    number: the map of every depth of that size's widths."""
    sizes = getattr(cls, "SIZES", None) or {}
    if not sizes:
        raise ValueError(
            f"{cls.__name__} has no sizes of its own to read a layout off: call "
            "get_layout_map on a model (model_structure(build) gives one without memory)"
        )
    if size is None:  # BERT's base, GPT-2's small: the family's usual size
        size = next((name for name in ("base", "small") if name in sizes), next(iter(sizes)))
    if size not in sizes:
        raise ValueError(f"Expected `size` one of {sorted(sizes)}. Received: size={size!r}")
    structure = model_structure(lambda: cls.from_size(size))
    layouts = layout_map(structure, device_mesh, model_parallel_dim_name, data_parallel_dim_name)
    general, seen = keras.distribution.LayoutMap(device_mesh), set()
    for key in list(layouts.keys()):  # (`in` on a LayoutMap is always true)
        pattern = f"^{re.sub(r'_[0-9]+/', r'_[0-9]+/', key)}$"  # every block alike
        if pattern not in seen:
            seen.add(pattern)
            general[pattern] = layouts[key]
    return general


class LayoutMapMixin:
    """`get_layout_map` for every model of the package (keras-hub's signature), on a
    model or on its class."""

    @_OnClassOrInstance
    def get_layout_map(
        self,
        device_mesh,
        model_parallel_dim_name="model",
        data_parallel_dim_name="batch",
        size=None,
    ):
        """The `LayoutMap` that shards this model's weights on `device_mesh`.

        Attention and feed-forward kernels are split Megatron-style (column then row)
        on the model axis, embedding tables on their vocabulary or hidden axis, and
        each of them on the data axis too (fully sharded); norms, biases and the rest
        stay whole. The map is read off this model's layers, so build the model first:
        `model_structure(build)` gives one whose variables take no memory. Then build
        it again in the distribution's scope, where its variables are created sharded.

        Called on the class, as keras-hub's users call it (`BertBackbone.get_layout_map(
        mesh)`), the map is read off the structure of the named `size` (default
        `"base"`, or GPT's `"small"`), its keys matching every block of a model of any
        depth: an axis is split where that size's width divides by the mesh axis, so
        for other widths call it on the model.

        Args:
            device_mesh: a `keras.distribution.DeviceMesh`.
            model_parallel_dim_name: the mesh axis that splits the weights.
            data_parallel_dim_name: the mesh axis that splits the batch (and, within
                each model shard, the weights too).
            size: on the class only: the named size (`SIZES`) whose widths decide.

        Returns:
            A `keras.distribution.LayoutMap` for `keras.distribution.ModelParallel`.

        Example:

        >>> import keras
        >>> from keras_attn.models import BertBackbone, model_structure
        >>> devices = [f"cpu:{index}" for index in range(8)]  # jax.devices() on JAX
        >>> mesh = keras.distribution.DeviceMesh((2, 4), ["batch", "model"], devices)
        >>> structure = model_structure(lambda: BertBackbone(100, 2, 4, 32, 64))
        >>> layouts = structure.get_layout_map(mesh)
        >>> layouts["transformer_layer_0/self_attention/query/kernel"].axes
        ('batch', 'model', None)
        >>> layouts["transformer_layer_0/feedforward_output_dense/kernel"].axes
        ('model', 'batch')
        >>> print(layouts["embeddings_layer_norm/gamma"])  # replicated
        None
        >>> on_class = BertBackbone.get_layout_map(mesh)  # keras-hub's way: any depth
        >>> on_class["transformer_layer_11/feedforward_output_dense/kernel"].axes
        ('model', 'batch')
        """
        if isinstance(self, type):
            return class_layout_map(
                self, device_mesh, model_parallel_dim_name, data_parallel_dim_name, size
            )
        if size is not None:
            raise ValueError(
                "`size` is for get_layout_map on the class; a model's map is read off its "
                f"own widths. Received: size={size!r}"
            )
        return layout_map(self, device_mesh, model_parallel_dim_name, data_parallel_dim_name)


@contextlib.contextmanager
def _random_state_kept():
    """Python's, NumPy's and Keras's global random states as they were on entry (a
    structure's seed generators draw their seeds from Python's generator)."""
    from keras.src.backend.common import global_state

    python, numpy = random.getstate(), np.random.get_state()
    pending = list(global_state.get_global_attribute("uninitialized_variables") or [])
    generator = global_state.get_global_attribute("global_seed_generator")
    try:
        yield
    finally:
        random.setstate(python)
        np.random.set_state(numpy)
        # The structure's variables are never initialised: a later stateless scope
        # must not create them (`keras` initialises every pending variable on exit).
        global_state.set_global_attribute("uninitialized_variables", pending)
        global_state.set_global_attribute("global_seed_generator", generator)


@keras_attn_export("keras_attn.models.model_structure")
def model_structure(build):
    """The model `build()` returns, with its variables' paths and shapes but no values.

    Built in a stateless scope that never initialises its variables: a BERT-large takes
    no memory for its weights (its structure builds in seconds), and the random
    states are left as they were, so the model built next draws the weights it would
    have drawn. Use it for `get_layout_map`, before building the model in a
    `ModelParallel` scope; the structure itself cannot be called or trained.

    Args:
        build: a function of no arguments that returns a model.

    Returns:
        The model, its variables uninitialised.

    Example:

    >>> from keras_attn.models import BertBackbone, model_structure
    >>> structure = model_structure(lambda: BertBackbone.from_size("large", vocabulary_size=30522))
    >>> structure.weights[0].path, tuple(structure.weights[0].shape)
    ('token_embedding/embeddings', (30522, 1024))
    """
    with _random_state_kept(), keras.StatelessScope(initialize_variables=False):
        return build()
