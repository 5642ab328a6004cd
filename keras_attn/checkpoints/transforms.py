"""Torch tensor <-> our variable: the rows of a family's checkpoint table.

A table is a list of `(variable, checkpoint name, Transform)`; the transform maps the
torch layout (Linear weights `(out, in)`, flat biases) to ours and back.
"""

import dataclasses
import math


class Transform:
    """Torch tensor <-> our variable, the same layout (embeddings, norms, plain biases)."""

    def theirs_shape(self, shape):
        """The torch shape that fits our variable's `shape`."""
        return tuple(shape)

    def to_ours(self, value, shape):
        return value.reshape(shape)

    def to_theirs(self, value):
        return value.reshape(self.theirs_shape(value.shape))


class Bias(Transform):
    """A bias split per head `(heads, head_dim)` here, flat in torch."""

    def theirs_shape(self, shape):
        return (math.prod(shape),)


@dataclasses.dataclass(frozen=True)
class Linear(Transform):
    """A torch Linear weight `(out, in)`; ours is `(in..., out...)`, the first `in_axes`
    axes being the input (2 for the attention output, whose input is split per head)."""

    in_axes: int = 1

    def theirs_shape(self, shape):
        return (math.prod(shape[self.in_axes :]), math.prod(shape[: self.in_axes]))

    def to_ours(self, value, shape):
        return value.T.reshape(shape)

    def to_theirs(self, value):
        return value.reshape(self.theirs_shape(value.shape)[::-1]).T


IDENTITY, BIAS, LINEAR = Transform(), Bias(), Linear()


def dense(layer, name):
    """The rows of a dense layer stored as a torch Linear `name`."""
    return [(layer.kernel, f"{name}.weight", LINEAR), (layer.bias, f"{name}.bias", IDENTITY)]


def norm(layer, name):
    """The rows of a LayerNormalization stored as a torch LayerNorm `name`."""
    return [(layer.gamma, f"{name}.weight", IDENTITY), (layer.beta, f"{name}.bias", IDENTITY)]
