"""Transformer-XL on the King James Bible: memory against no memory against GPT.

"We introduce the notion of recurrence into our deep self-attention network ... the
hidden state sequence computed for the previous segment is fixed and cached to be
reused as an extended context when the model processes the next new segment" (Dai et
al., 2019, 3.2). Three models of the same size and step budget, each trained on the
same number of tokens per step, on the KJV split as the other examples split it (60
chapters held out, seed 0; a WordPiece vocabulary from the other 1,129):

- Transformer-XL with a memory of `--memory` positions, trained on examples of
  `--segments` consecutive segments of `--segment-length` tokens, the memory carried
  from one segment to the next inside each example;
- the same model with no memory (each segment alone: the paper's "vanilla" model);
- `GPTLanguageModel` with learned positions, trained on single segments.

Each is then read over the held-out chapters as one text cut into 16 parallel
streams, segment by segment (Transformer-XL's evaluation); perplexity is
`exp(mean negative log-likelihood)` over every held-out token. The model with
memory is read with each of `--eval-memories` (default: none, its training memory, 2x
and 4x; section 4: the memory at evaluation can be longer than in training); relative
distances beyond the longest of training (memory + segment) share its encoding, as the
paper's `clamp_len` does.

Run:  python examples/transformer_xl_kjv.py [--steps N] [--seeds 0 1 2] [--models xl ...]
      [--memory M] [--eval-memories 0 32 64 128] [--smoke]
"""

import argparse
import math
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_attn.data import WordPieceTokenizer, kjv_documents, train_wordpiece_vocabulary  # noqa: E402
from keras_attn.models import GPTLanguageModel, TransformerXL  # noqa: E402

MODELS = ("xl", "xl_no_memory", "gpt")


def kjv_streams(vocabulary_size, smoke=False):
    """`(tokenizer, training ids, held-out ids)`: each split's chapters as one stream,
    verses ended by `[SEP]`."""
    chapters = kjv_documents()
    order = np.random.default_rng(0).permutation(len(chapters))
    if smoke:
        order = order[:15]
    held_out = [chapters[i] for i in order[: 3 if smoke else 60]]
    train = [chapters[i] for i in order[3 if smoke else 60 :]]
    verses = tf.data.Dataset.from_tensor_slices([v for chapter in train for v in chapter])
    tokenizer = WordPieceTokenizer(
        train_wordpiece_vocabulary(verses, 500 if smoke else vocabulary_size)
    )

    def stream(documents):
        pieces = tokenizer.tokenize(tf.constant([v for chapter in documents for v in chapter]))
        separators = tf.fill([pieces.nrows(), 1], tokenizer.sep_id)
        return tf.concat([pieces, separators], axis=1).flat_values.numpy().astype("int32")

    return tokenizer, stream(train), stream(held_out)


def windows(stream, length, count, seed):
    """`count` random windows of `length + 1` consecutive tokens: inputs and labels."""
    starts = np.random.default_rng(seed).integers(0, len(stream) - length - 1, count)
    rows = np.stack([stream[s : s + length + 1] for s in starts])
    return rows[:, :-1], rows[:, 1:]


def segment_perplexity(model, stream, segment_length, num_streams=16):
    """A model without memory read as Transformer-XL is read: the text cut into
    `num_streams` parts, each into segments, every token predicted from its segment."""
    part = len(stream) // num_streams
    parts = stream[: part * num_streams].reshape(num_streams, part)
    total, count = 0.0, 0
    for start in range(0, part - 1, segment_length):
        labels = parts[:, start + 1 : start + segment_length + 1]
        inputs = parts[:, start : start + labels.shape[1]]
        log_probs = tf.nn.log_softmax(model(inputs, training=False), axis=-1)
        total -= float(tf.reduce_sum(tf.gather(log_probs, labels, batch_dims=2)))
        count += labels.size
    return math.exp(total / count)


def train(model, inputs, labels, batch_size, learning_rate, steps, jit_compile=True):
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0, steps, warmup_target=learning_rate, warmup_steps=max(1, steps // 20)
    )
    optimizer = keras.optimizers.AdamW(schedule, weight_decay=0.01)
    model.compile(optimizer=optimizer, jit_compile=jit_compile)
    model.fit(inputs, labels, batch_size=batch_size, epochs=1, verbose=0, shuffle=False)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1500, help="training steps per model")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--segment-length", type=int, default=32)
    parser.add_argument("--segments", type=int, default=4, help="segments per training example")
    parser.add_argument("--memory", type=int, default=32, help="memory length in training")
    parser.add_argument(
        "--eval-memories", type=int, nargs="+", help="memory lengths to read the held-out text with"
    )
    parser.add_argument("--batch-size", type=int, default=16, help="examples of --segments")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument(
        "--models", nargs="+", default=list(MODELS), choices=MODELS, help="the models to train"
    )
    parser.add_argument("--smoke", action="store_true", help="seconds: a few chapters and steps")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be positive")
    steps = 2 if args.smoke else args.steps
    if args.smoke:  # seconds, not minutes: one small layer, nothing compiled
        args.layers, args.hidden_dim, args.segments = 1, 32, 2
    tokenizer, train_ids, held_out_ids = kjv_streams(args.vocabulary_size, args.smoke)
    vocabulary = tokenizer.vocabulary_size
    print(
        f"{vocabulary} WordPieces; {len(train_ids)} training, {len(held_out_ids)} held-out tokens"
    )
    size = dict(
        num_layers=args.layers,
        num_heads=args.heads,
        hidden_dim=args.hidden_dim,
        intermediate_dim=4 * args.hidden_dim,
        dropout=0.1,
    )
    segment, example = args.segment_length, args.segment_length * args.segments
    eval_memories = args.eval_memories or [0, args.memory, 2 * args.memory, 4 * args.memory]
    results = {}
    for seed in args.seeds:
        start = time.time()
        inputs, labels = windows(train_ids, example, steps * args.batch_size, seed)
        row = {}
        for name, memory in (("xl", args.memory), ("xl_no_memory", 0)):
            if name not in args.models:
                continue
            keras.utils.set_random_seed(seed)
            # Distances beyond the longest seen in training share its encoding (the
            # paper's `clamp_len`): what lets a longer memory help at evaluation.
            model = TransformerXL(
                vocabulary,
                segment_length=segment,
                memory_length=memory,
                clamp_length=args.memory + segment,
                **size,
            )
            train(model, inputs, labels, args.batch_size, args.learning_rate, steps, not args.smoke)
            for length in eval_memories if memory else [0]:
                key = f"xl_memory_{length}" if memory else name
                row[key] = model.stream_perplexity(held_out_ids, 16, memory_length=length)[
                    "perplexity"
                ]
        if "gpt" in args.models:  # the same tokens per step, as single segments
            keras.utils.set_random_seed(seed)
            gpt = GPTLanguageModel(vocabulary, max_sequence_length=segment, **size)
            train(
                gpt,
                inputs.reshape(-1, segment),
                labels.reshape(-1, segment),
                args.batch_size * args.segments,
                args.learning_rate,
                steps,
                not args.smoke,
            )
            row["gpt"] = segment_perplexity(gpt, held_out_ids, segment)
        results[seed] = row
        print(
            f"seed {seed} ({(time.time() - start) / 60:.1f} min): "
            + ", ".join(f"{k} {v:.2f}" for k, v in row.items())
        )
    names = {
        f"xl_memory_{m}": f"Transformer-XL (memory {args.memory}), read with memory {m}"
        for m in eval_memories
    }
    names.update(
        {"xl_no_memory": "Transformer-XL trained without memory", "gpt": "GPTLanguageModel"}
    )
    print(f"\nHeld-out perplexity, segments of {segment}, {steps} steps ({len(args.seeds)} seeds):")
    for key, label in names.items():
        if key not in results[args.seeds[0]]:
            continue
        values = [results[s][key] for s in args.seeds]
        print(f"  {label:55s} {np.mean(values):8.2f}  ({', '.join(f'{v:.2f}' for v in values)})")
    return results


if __name__ == "__main__":
    main()
