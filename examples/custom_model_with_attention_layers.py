"""Use keras_attn's layers in your own Keras model: five scoring functions side by side.

The task is associative recall, the smallest problem that needs attention: the input
lists key/value pairs and ends with one of the keys,

    k3 v7  k1 v2  k5 v0  k9 v4 | k5   ->   v0

and the model must answer the value stored under that key. The last position's query
has to find the matching key among the pairs and copy the value next to it; a model
that only pools the sequence cannot tell which value belongs to which key.

"An attention function can be described as mapping a query and a set of key-value
pairs to an output ... where the weight assigned to each value is computed by a
compatibility function of the query with the corresponding key." (Vaswani et al.,
2017, section 3.) keras_attn lets you choose that compatibility function:

    additive    v^T tanh(W_q q + W_k k)      Bahdanau et al., 2015
    dot         q^T k                        Luong et al., 2015
    scaled_dot  q^T k / sqrt(d_k)            Vaswani et al., 2017
    cosine      t * q^T k / (|q| |k|)        with a learned temperature t
    general     q^T W k                      Luong et al., 2015

Each scoring trains until 99% held-out accuracy. What two runs on 2 CPU cores gave
(seed 0; epochs to 99%): cosine 5 and 4, scaled_dot 12 and 12, general 18 and not
within 40 epochs (98.2%), additive 28 and 25, dot 35 and 28 (multi-threaded CPU
kernels make runs differ even with one seed). Unscaled dot products start with a
saturated softmax and tiny gradients, the effect the Transformer's 1/sqrt(d_k) was
introduced to counter.

Run:  python examples/custom_model_with_attention_layers.py [--smoke]   (~10 min; smoke: seconds)
"""

import argparse
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attn.layers import (  # noqa: E402
    LearnedPositionEmbedding,
    MultiHeadAttention,
    TransformerEncoderBlock,
    scoring,
)

NUM_PAIRS, NUM_KEYS, NUM_VALUES = 4, 10, 10
LENGTH = 2 * NUM_PAIRS + 1  # pairs, then the query key


def make_data(n, seed):
    """Token ids: keys are 0..9, values 10..19; the answer is a value index 0..9."""
    rng = np.random.default_rng(seed)
    keys = np.stack([rng.choice(NUM_KEYS, NUM_PAIRS, replace=False) for _ in range(n)])
    values = rng.integers(0, NUM_VALUES, (n, NUM_PAIRS))
    tokens = np.empty((n, LENGTH), "int32")
    tokens[:, 0:-1:2], tokens[:, 1:-1:2] = keys, NUM_KEYS + values
    asked = rng.integers(0, NUM_PAIRS, n)
    tokens[:, -1] = keys[np.arange(n), asked]
    return tokens, values[np.arange(n), asked]


def build_model(score):
    """Embeddings + positions, one encoder block (so each value sees its key), then
    one attention layer whose query is the last position."""
    tokens = keras.Input((LENGTH,), dtype="int32")
    x = keras.layers.Embedding(NUM_KEYS + NUM_VALUES, 64)(tokens)
    # "Since our model contains no recurrence and no convolution, in order for the model
    # to make use of the order of the sequence, we must inject some information about
    # the relative or absolute position of the tokens" (Vaswani et al., 3.5). Learned
    # positions, added by the caller as in BERT.
    x = x + LearnedPositionEmbedding(LENGTH)(x)
    # "Each layer has two sub-layers. The first is a multi-head self-attention
    # mechanism, and the second is a simple, position-wise fully connected feed-forward
    # network" (3.1). Here it lets each value token see the key just before it.
    x = TransformerEncoderBlock(num_heads=4, intermediate_dim=128, score=score)(x)
    # "Multi-head attention allows the model to jointly attend to information from
    # different representation subspaces at different positions" (3.2.2): 4 heads of
    # 16 dimensions. The query is the last position (the key asked for); keys and
    # values are all positions. `score=` is the compatibility function.
    answer = MultiHeadAttention(num_heads=4, key_dim=16, score=score)(x[:, -1:], x)
    logits = keras.layers.Dense(NUM_VALUES)(keras.layers.Flatten()(answer))
    model = keras.Model(tokens, logits)
    model.compile(
        optimizer=keras.optimizers.Adam(2e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


class StopAtAccuracy(keras.callbacks.Callback):
    """Stops training once held-out accuracy reaches `target`; records the epoch."""

    def __init__(self, target):
        super().__init__()
        self.target, self.epochs_needed = target, None

    def on_epoch_end(self, epoch, logs=None):
        if logs.get("val_accuracy", 0.0) >= self.target:
            self.epochs_needed = epoch + 1
            self.model.stop_training = True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few seconds: tiny data, 1 epoch")
    parser.add_argument("--max-epochs", type=int, default=40)
    parser.add_argument("--train-size", type=int, default=20000)
    parser.add_argument("--target", type=float, default=0.99, help="held-out accuracy to stop at")
    args = parser.parse_args(argv)
    train_size, max_epochs = (512, 1) if args.smoke else (args.train_size, args.max_epochs)
    train, held_out = make_data(train_size, seed=0), make_data(2000, seed=1)

    print(
        f"Associative recall, {NUM_PAIRS} pairs; chance {1 / NUM_VALUES:.2f}. Training each "
        f"scoring until held-out accuracy >= {args.target} (at most {max_epochs} epochs)."
    )
    results = {}
    for score in sorted(scoring.SCORES):
        keras.utils.set_random_seed(0)
        model = build_model(score)
        stop = StopAtAccuracy(args.target)
        start = time.time()
        history = model.fit(
            *train,
            validation_data=held_out,
            batch_size=128,
            epochs=max_epochs,
            callbacks=[stop],
            verbose=0,
        )
        accuracy = history.history["val_accuracy"][-1]
        needed = f"{stop.epochs_needed} epochs" if stop.epochs_needed else "not reached"
        results[score] = accuracy
        print(
            f"{score:>10}: held-out accuracy {accuracy:.3f}, target {needed} "
            f"({time.time() - start:.0f} s)",
            flush=True,
        )
    return results


if __name__ == "__main__":
    main()
