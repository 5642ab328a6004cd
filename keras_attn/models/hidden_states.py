"""Every layer's hidden states from a functional model's own graph (internal)."""

import keras


class HiddenStatesMixin:
    """`hidden_states(inputs)` for the functional models: the embeddings, then each
    block's output, read off the graph the model was built as (no second forward pass
    to keep in step with `call`). A model names its stacks in `_hidden_state_stacks`:
    `{name: (blocks, final_norm)}`; one stack gives a list, several a dict of lists.
    """

    def _hidden_state_stacks(self):
        return {"hidden_states": (self.transformer_layers, getattr(self, "final_layer_norm", None))}

    def hidden_states(self, inputs, training=False):
        """The hidden states of every layer, as feature-based use reads them.

        The embeddings (what the first block reads), then each block's output; where
        the model ends in a LayerNorm (pre-LN), the last is taken after it, as
        `transformers`' `output_hidden_states` gives them. With ALBERT's shared
        layers, each application of the block is a layer here.

        Args:
            inputs: what the model's `call` takes.
            training: dropout on or off.

        Returns:
            A list of `num_layers + 1` tensors `(batch, length, hidden_dim)`; for an
            encoder-decoder, a dict of two such lists, `"encoder"` and `"decoder"`.

        Example:

        >>> import numpy as np
        >>> from keras_attn.models import GPTLanguageModel
        >>> model = GPTLanguageModel(100, 3, 2, 16, 32, max_sequence_length=8)
        >>> states = model.hidden_states(np.array([[5, 6, 7]]))
        >>> len(states), tuple(states[-1].shape)
        (4, (1, 3, 16))
        """
        return self.hidden_states_model()(inputs, training=training)

    def hidden_states_model(self):
        """A `keras.Model` from this model's inputs to `hidden_states`, on the same
        layers (the same variables: freezing this model freezes it)."""
        stacks = {
            name: _stack_states(self, blocks, final_norm)
            for name, (blocks, final_norm) in self._hidden_state_stacks().items()
        }
        outputs = stacks["hidden_states"] if list(stacks) == ["hidden_states"] else stacks
        return keras.Model(self.input, outputs, name=f"{self.name}_hidden_states")


def _graph_nodes(model, layers):
    """The nodes of `layers` in `model`'s graph, from its inputs to its outputs."""
    ids = {id(layer) for layer in layers}
    nodes = []
    for depth in sorted(model._nodes_by_depth, reverse=True):
        nodes += [node for node in model._nodes_by_depth[depth] if id(node.operation) in ids]
    return nodes


def _stack_states(model, blocks, final_norm):
    """The first block's input, then every block application's first output."""
    nodes = _graph_nodes(model, blocks)
    if len(nodes) != len(blocks):
        raise ValueError(
            f"Expected {len(blocks)} block applications in {model.name}'s graph. "
            f"Received: {len(nodes)}"
        )
    states = [nodes[0].arguments.args[0]] + [node.outputs[0] for node in nodes]
    if final_norm is not None:
        (norm,) = _graph_nodes(model, [final_norm])
        states[-1] = norm.outputs[0]
    return states
