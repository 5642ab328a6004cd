"""Forward + backward time of our MultiHeadAttention against Keras's, in one run.

Both layers get the same inputs and weights (ours is a drop-in: `set_weights`
copies Keras's) and are timed alternately so that machine noise hits both alike, on
the backend `--backend` names: TensorFlow traces each step once with `tf.function`,
with and without XLA; JAX compiles it with `jax.jit`; PyTorch runs it eagerly.
Reports the median of `--repeats` timings and the ratio ours / Keras (below 1.0:
ours is faster).

    python benchmarks/attention.py            # the README's figures (TensorFlow)
    python benchmarks/attention.py --backend jax
    python benchmarks/attention.py --repeats 5 --seq-lengths 64
"""

import argparse
import os
import platform

from timing import (  # benchmarks/timing.py
    JIT_CHOICES,
    add_backend_flag,
    alternating_medians,
    backend_version,
    check_backend,
    select_backend,
)

select_backend(__name__)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attn.layers import MultiHeadAttention  # noqa: E402


def make_step(layer, jit_compile):
    """Forward + backward of `mean(layer(x, x, mask) ** 2)`: `(x, mask) -> (loss, grads)`."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        @tf.function(jit_compile=jit_compile)
        def step(x, padding_mask):
            with tf.GradientTape() as tape:
                y = layer(x, x, attention_mask=padding_mask[:, None, :])
                loss = tf.reduce_mean(tf.square(y))
            return loss, tape.gradient(loss, layer.trainable_weights)

        return step
    if backend == "jax":
        import jax

        def loss_fn(trainable, non_trainable, x, padding_mask):
            y, _ = layer.stateless_call(
                trainable, non_trainable, x, x, attention_mask=padding_mask[:, None, :]
            )
            return jax.numpy.mean(jax.numpy.square(y))

        gradient = jax.value_and_grad(loss_fn)
        gradient = jax.jit(gradient) if jit_compile else gradient
        trainable = [v.value for v in layer.trainable_variables]
        non_trainable = [v.value for v in layer.non_trainable_variables]
        return lambda x, padding_mask: gradient(trainable, non_trainable, x, padding_mask)
    import torch

    def step(x, padding_mask):
        y = layer(x, x, attention_mask=padding_mask[:, None, :])
        loss = torch.mean(torch.square(y))
        return loss, torch.autograd.grad(loss, [v.value for v in layer.trainable_weights])

    return step


def time_pair(seq_length, args, jit_compile):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch_size, seq_length, args.hidden_dim)).astype("float32")
    x = keras.ops.convert_to_tensor(x)
    lengths = rng.integers(seq_length // 2, seq_length + 1, args.batch_size)
    padding_mask = keras.ops.convert_to_tensor(np.arange(seq_length)[None] < lengths[:, None])
    key_dim = args.hidden_dim // args.num_heads
    theirs = keras.layers.MultiHeadAttention(args.num_heads, key_dim)
    ours = MultiHeadAttention(args.num_heads, key_dim)
    theirs(x, x)
    ours(x, x)
    ours.set_weights(theirs.get_weights())
    steps = {"ours": make_step(ours, jit_compile), "keras": make_step(theirs, jit_compile)}
    calls = {
        name: (lambda step=step: keras.ops.convert_to_numpy(step(x, padding_mask)[0]))
        for name, step in steps.items()
    }
    medians = alternating_medians(
        calls, args.repeats, warmup=args.warmup
    )  # traces, compiles, warms up
    np.testing.assert_allclose(calls["ours"](), calls["keras"](), rtol=1e-4)
    return medians


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq-lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--hidden-dim", type=int, default=256)
    parser.add_argument("--num-heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=30, help="timed runs per layer")
    parser.add_argument("--warmup", type=int, default=3)
    add_backend_flag(parser)
    args = parser.parse_args(argv)
    backend = check_backend(parser, args)

    print(
        f"Keras {keras.__version__} on {backend} {backend_version(backend)}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"
    )
    print(
        f"batch {args.batch_size}, hidden {args.hidden_dim}, {args.num_heads} heads, padding mask, "
        f"forward + backward, median of {args.repeats}\n"
    )
    print(f"{'seq':>5} {'jit':>5} {'ours ms':>9} {'keras ms':>9} {'ours/keras':>11}")
    rows = []
    for jit_compile in JIT_CHOICES[backend]:
        for seq_length in args.seq_lengths:
            result = time_pair(seq_length, args, jit_compile)
            ratio = result["ours"] / result["keras"]
            rows.append((seq_length, jit_compile, result["ours"], result["keras"], ratio))
            print(
                f"{seq_length:>5} {str(jit_compile):>5} {1e3 * result['ours']:>9.2f} "
                f"{1e3 * result['keras']:>9.2f} {ratio:>11.3f}",
                flush=True,
            )
    return rows


if __name__ == "__main__":
    main()
