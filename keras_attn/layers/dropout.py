"""Dropout whose mask is drawn with an explicitly named random-number algorithm."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.layers.Dropout")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout`, with a cheaper mask on the TensorFlow backend.

    The same layer as Keras's (arguments, config, seeding through a
    `keras.random.SeedGenerator` that advances on every call, inverted scaling,
    identity when not training), except for how the mask is drawn on the
    TensorFlow backend: from TensorFlow's Philox generator (named, not left to
    "auto_select"), 16 random bits per element instead of a 32-bit float, so half
    the generator's work. An element is kept when its 16 bits, read as an integer
    in [0, 65536), are at least `round(rate * 65536)`; the drop probability is
    therefore `rate` to within 2**-17 (0.1 becomes 0.100006), and kept elements are
    scaled by the exact inverse of that keep probability, so the output's
    expectation equals the input, as with Keras's layer.

    Why: in an XLA-compiled CPU training step (`jit_compile=True`) drawing the
    masks is the most expensive elementwise work: a BERT-mini step at
    `benchmarks/bert.py`'s sizes took 469 ms with Keras's layer, 428 ms with this
    one and about 385 ms without dropout (TensorFlow 2.21, 2 CPU cores, alternating
    medians of 15). Outside XLA the two cost the same. On other backends it is
    Keras's layer.

    Every dropout in `keras_attn`'s layers and models is this layer.

    Args:
        rate: float in [0, 1], the fraction of inputs to drop.
        noise_shape: optional shape of the binary mask, broadcast against the
            inputs (`None` entries take the input's size), as in Keras.
        seed: optional int seed of the layer's `SeedGenerator`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: a tensor of any shape.
        training: whether to drop (default False: the inputs unchanged).

    Returns:
        A tensor shaped like `inputs`: kept entries scaled by `1 / (1 - rate)`,
        dropped ones 0.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import Dropout
    >>> layer = Dropout(0.5, seed=1)
    >>> y = ops.convert_to_numpy(layer(np.ones((1000,), "float32"), training=True))
    >>> sorted(set(y.tolist()))  # dropped, or kept and scaled by 1 / (1 - 0.5)
    [0.0, 2.0]
    >>> 400 < int((y == 0).sum()) < 600
    True
    >>> ops.convert_to_numpy(layer(np.ones((3,), "float32"))).tolist()  # not training
    [1.0, 1.0, 1.0]
    """

    def call(self, inputs, training=False):
        if not training or self.rate == 0 or keras.backend.backend() != "tensorflow":
            return super().call(inputs, training=training)
        import tensorflow as tf

        threshold = round(self.rate * 65536)  # drop where the 16 bits are below it
        if threshold >= 65536:  # rate 1 (or within 2**-17 of it): everything dropped
            return ops.zeros_like(inputs)
        # The seed as Keras's TensorFlow backend makes it: an int32 pair from the
        # layer's SeedGenerator (which advances on every call).
        seed = self.seed_generator.next()
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), "int32")
        shape = tf.shape(inputs)
        if self.noise_shape is not None:
            shape = tf.stack(
                [shape[i] if size is None else size for i, size in enumerate(self.noise_shape)]
            )
        size = tf.reduce_prod(shape)
        # ceil(size / 2) random 32-bit words, each split into two 16-bit halves.
        words = tf.random.stateless_uniform(
            [(size + 1) // 2], seed=seed, dtype="int32", minval=None, maxval=None, alg="philox"
        )
        halves = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]
        keep = tf.reshape(halves >= tf.constant(threshold, tf.uint16), shape)
        scale = 65536.0 / (65536 - threshold)  # 1 / P(keep), exactly
        return inputs * ops.cast(keep, inputs.dtype) * ops.cast(scale, inputs.dtype)
