"""How the blocks write their arithmetic into a graph: Keras's own ops (`PLAIN`), or a
form an exporter chooses for the graph it serves (`keras_attn.export.serving_plan`)."""

from keras_attn.layers.layer_utils import heads_first


class ComputePlan:
    """The plain plan: what `MultiHeadAttention` and the residual blocks compute with
    unless an exporter gives a copy of them another (their `compute_plan` attribute).

    A plan changes how a result is written, never the result: a subclass answers what
    these methods answer, within float rounding, for every input.
    """

    def heads_first(self, x):
        """`(batch, length, heads, dim)` -> `(batch, heads, length, dim)` (its own
        inverse)."""
        return heads_first(x)

    def real_rows(self, padding_mask):
        """An object whose `gather(x)` takes the real tokens of a padded `(batch, length,
        ...)` tensor as rows and whose `scatter(rows)` puts them back (zeros at the
        padding positions), for a block to run its per-token layers on those rows alone;
        `None` (run on the padded batch)."""
        return None

    def normalize(self, norm, x, rows=None):
        """`norm(x)`; `rows`: the `real_rows` object `x`'s rows came from, or `None`."""
        return norm(x)

    def product(self, dense, input_axes):
        """A function from rows `(n, in)` to `dense`'s product with its kernel, bias
        added (its activation is applied after), to use in place of the kernel's; `None`
        (multiply by the kernel)."""
        return None


PLAIN = ComputePlan()
