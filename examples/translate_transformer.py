"""Train a small Transformer to translate Chinese to English (Tatoeba) and score it with BLEU.

"The Transformer follows this overall architecture using stacked self-attention and
point-wise, fully connected layers for both the encoder and decoder" (Vaswani et al.,
2017). Here in miniature, on the 56,578 Tatoeba zh-en pairs the package hsg ships:

1. 1,000 Chinese sentences are held out (seed 0) with all their English translations,
   which are the references of the test set; no held-out sentence is trained on.
2. One WordPiece vocabulary per side, trained on the training pairs with keras-hub's
   trainer (Chinese splits into characters; English keeps its case).
3. Teacher forcing on length-bucketed batches, label smoothing 0.1, Adam
   (beta_2 0.98), warm-up then linear decay over a time budget.
4. Beam search (4 beams, length penalty 0.6, as in the paper) over the held-out
   sources, detokenised, and corpus BLEU from sacrebleu (13a tokenisation, cased),
   against all references and against the first reference only.

Run:  python examples/translate_transformer.py [--minutes 25 | --steps N] [--smoke]
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
    WordPieceTokenizer,
    tatoeba_zh_en,
    train_wordpiece_vocabulary,
    translation_dataset,
)
from keras_attn.models import TransformerSeq2Seq  # noqa: E402
from keras_attn.training import BudgetFlags, TimeBudget  # noqa: E402


def translate(
    model,
    sources,
    source_tokenizer,
    target_tokenizer,
    max_length,
    batch_size,
    num_beams,
    length_penalty,
):
    """Beam-search translations of `sources` (strings), detokenised."""
    ids = source_tokenizer.tokenize(tf.constant(sources))
    too_long = int(tf.reduce_sum(tf.cast(ids.row_lengths() > max_length, tf.int32)))
    if too_long:
        print(f"{too_long} test sources longer than {max_length} pieces are cut to {max_length}")
    ids = ids[:, :max_length].to_tensor(shape=[len(sources), max_length]).numpy()
    outputs = []
    for start in range(0, len(sources), batch_size):
        batch = ids[start : start + batch_size]
        rows = len(batch)
        if rows < batch_size:  # one shape, one compilation
            batch = np.concatenate([batch, np.repeat(batch[:1], batch_size - rows, 0)])
        tokens = model.generate(
            batch,
            max_length,
            start_token_id=target_tokenizer.cls_id,
            end_token_id=target_tokenizer.sep_id,
            strategy="beam",
            num_beams=num_beams,
            length_penalty=length_penalty,
        )
        outputs.extend(target_tokenizer.detokenize(tokens[:rows]))
    return outputs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    budget_flags = BudgetFlags(parser, default_minutes=25)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden-dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--intermediate-dim", type=int, default=1024)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="peak Adam rate")
    parser.add_argument("--source-vocabulary", type=int, default=5000)
    parser.add_argument("--target-vocabulary", type=int, default=6000)
    parser.add_argument("--max-length", type=int, default=40)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--length-penalty", type=float, default=0.6)
    parser.add_argument(
        "--xla",
        action="store_true",
        help="train with XLA (about 9%% faster per step here, after ~95 s compiling buckets)",
    )
    parser.add_argument("--logdir", default="runs/translate_transformer")
    parser.add_argument("--smoke", action="store_true", help="seconds: little data, a few steps")
    args = parser.parse_args(argv)
    seconds = budget_flags.seconds(args)  # None: --steps alone, a step budget
    started = time.time()

    # 1. The pairs, and 1,000 held-out Chinese sentences with all their translations.
    data = tatoeba_zh_en()
    train, test = data.split(test_groups=1000, seed=0)
    if args.smoke:
        train, test = train.subset(range(400)), test.subset(range(20))
    sources, references = test.references()
    print(
        f"{len(train)} training pairs; {len(sources)} test sentences with "
        f"{sum(map(len, references))} references"
    )

    # 2. One WordPiece vocabulary per side (keras-hub's trainer), from training text only.
    def vocabulary(texts, size):
        return train_wordpiece_vocabulary(
            tf.data.Dataset.from_tensor_slices(texts), size, lowercase=False
        )

    source_tokenizer = WordPieceTokenizer(
        vocabulary(train.sources, args.source_vocabulary), lowercase=False
    )
    target_tokenizer = WordPieceTokenizer(
        vocabulary(train.targets, args.target_vocabulary), lowercase=False
    )
    print(
        f"Vocabularies: {source_tokenizer.vocabulary_size} Chinese, "
        f"{target_tokenizer.vocabulary_size} English pieces"
    )

    # 3. A small Transformer, trained with teacher forcing for the time budget. The
    #    decoder's self-attention is causal: "We also modify the self-attention sub-layer
    #    in the decoder stack to prevent positions from attending to subsequent
    #    positions" (3.1). "We apply dropout to the output of each sub-layer, before it is
    #    added to the sub-layer input and normalized" (5.4), P_drop = 0.1; the loss is
    #    cross-entropy with label smoothing 0.1, which "hurts perplexity, as the model
    #    learns to be more unsure, but improves accuracy and BLEU score" (5.4).
    batches = translation_dataset(
        train,
        source_tokenizer,
        target_tokenizer,
        args.batch_size,
        max_length=args.max_length,
        seed=0,
    )
    keras.utils.set_random_seed(0)
    model = TransformerSeq2Seq(
        source_tokenizer.vocabulary_size,
        target_vocabulary_size=target_tokenizer.vocabulary_size,
        num_layers=args.layers,
        num_heads=args.heads,
        hidden_dim=args.hidden_dim,
        intermediate_dim=args.intermediate_dim,
        dropout=args.dropout,
        max_sequence_length=args.max_length,
    )
    # "We used the Adam optimizer with beta_1 = 0.9, beta_2 = 0.98 and epsilon = 10^-9"
    # (5.3); the paper's rate warms up over 4,000 steps and decays as 1/sqrt(step)
    # (keras_attn.training.TransformerSchedule). A 25-minute run has ~5,000 steps; here
    # the rate warms up over 5% of the budget and decays linearly to zero at the
    # deadline, so the run ends on a small rate whatever the machine's speed.
    model.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        jit_compile=args.xla,
    )
    budget = TimeBudget(
        0.1 * 60 if args.smoke and not args.steps else seconds,
        args.learning_rate,
        warmup=0.05,
        total_steps=args.steps,
    )
    model.fit(
        batches.repeat(),
        steps_per_epoch=3 if args.smoke else 500,
        epochs=1 if args.smoke else 1000,
        verbose=2,
        callbacks=[budget, keras.callbacks.TensorBoard(args.logdir)],
    )
    trained = time.time() - budget.start
    # Keep what was trained before decoding: the model and both vocabularies.
    os.makedirs(args.logdir, exist_ok=True)
    model.save(os.path.join(args.logdir, "translator.keras"))
    for name, tokenizer in (("source", source_tokenizer), ("target", target_tokenizer)):
        with open(os.path.join(args.logdir, f"{name}_vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(tokenizer.vocabulary) + "\n")

    # 4. Beam search on the held-out sentences; BLEU with sacrebleu. "We used beam search
    #    with a beam size of 4 and length penalty alpha = 0.6" (6.1), the penalty being
    #    Wu et al.'s ((5 + length) / 6)^alpha. Each step reuses the cached keys and
    #    values of earlier positions instead of re-running the decoder.
    from sacrebleu.metrics import BLEU

    hypotheses = translate(
        model,
        sources,
        source_tokenizer,
        target_tokenizer,
        args.max_length,
        batch_size=100,
        num_beams=args.beams,
        length_penalty=args.length_penalty,
    )
    most = max(map(len, references))
    streams = [[refs[i] if i < len(refs) else "" for refs in references] for i in range(most)]
    metric = BLEU()  # 13a tokenisation, cased, exponential smoothing: sacrebleu's defaults
    bleu = metric.corpus_score(hypotheses, streams)
    signature = metric.get_signature()
    bleu_one = metric.corpus_score(hypotheses, [[refs[0] for refs in references]])
    for source, hypothesis, refs in list(zip(sources, hypotheses, references, strict=True))[:8]:
        print(f"  {source}  ->  {hypothesis}   (ref: {refs[0]})")
    print(
        f"\nTrained {trained / 60:.1f} min ({budget.steps} steps); BLEU on {len(sources)} held-out "
        f"sentences: {bleu.score:.1f} with all references, {bleu_one.score:.1f} with the first "
        f"only ({signature}); whole run {(time.time() - started) / 60:.1f} min."
    )
    return {"bleu": bleu.score, "bleu_single_reference": bleu_one.score, "steps": budget.steps}


if __name__ == "__main__":
    main()
