"""The choice axis of a multiple-choice batch folded into the batch and back: what every
model that scores choices one by one shares (BERT's multiple choice, KagNet)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attn")
class FoldChoices(keras.layers.Layer):
    """`(batch, num_choices, ...)` <-> `(batch * num_choices, ...)` (internal).

    `fold=True` merges the choice axis into the batch (the axes after it static, or
    one of any size); `fold=False` splits a `(batch * num_choices, 1)` score column
    back into `(batch, num_choices)`.
    """

    def __init__(self, num_choices, fold=True, **kwargs):
        super().__init__(**kwargs)
        self.num_choices = num_choices
        self.fold = fold

    def call(self, x):
        if self.fold:
            rest = tuple(x.shape[2:])
            return ops.reshape(x, (-1, *rest) if len(rest) > 1 else (-1, ops.shape(x)[-1]))
        return ops.reshape(x, (-1, self.num_choices))

    def compute_output_shape(self, input_shape):
        if self.fold:
            batch = None if input_shape[0] is None else input_shape[0] * self.num_choices
            return (batch, *input_shape[2:])
        batch = None if input_shape[0] is None else input_shape[0] // self.num_choices
        return (batch, self.num_choices)

    def get_config(self):
        config = super().get_config()
        config.update({"num_choices": self.num_choices, "fold": self.fold})
        return config
