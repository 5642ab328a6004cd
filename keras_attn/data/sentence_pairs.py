"""Sentence pairs for next-sentence / sentence-order prediction, made in the graph."""

import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int
from keras_attn.data.segment_packing import pack_segments

OBJECTIVES = ("nsp", "sop", "none")


@keras_attn_export("keras_attn.data.SentencePairSampler", serializable=False)
class SentencePairSampler:
    """Turns documents of sentences into BERT's `(A, B, label)` training pairs.

    Following Google's `create_pretraining_data.py`: from an anchor sentence, take
    whole sentences of the same document until the token budget is reached, split
    them at a random sentence boundary into A and the true continuation B; for NSP,
    half of the time B is replaced by text from a random other document (label 1,
    NotNext; label 0 is IsNext, the original checkpoints' convention). For SOP
    (ALBERT) B is always the true continuation and half of the time the two are
    swapped (label 1 = swapped). With `"none"` (ELECTRA, which has no sentence
    objective) B is the true continuation, in order, and the label is 0. Everything
    runs on tensors: the corpus is tokenised once into a flat RaggedTensor, and each
    pair is a pair of slices of it.

    Args:
        tokenizer: a `WordPieceTokenizer` (its `sequence_length` is the budget,
            `[CLS]` and two `[SEP]` included).
        documents: a list of documents, each a list of sentence strings. Documents
            with a single sentence cannot anchor a pair but can supply random Bs.
        objective: `"nsp"` (default), `"sop"` or `"none"`.
        linker: optional `GraphLinker`: each pair also gets `entity_ids`, every linked
            mention's entity at its first piece (ERNIE's pre-training).

    Call arguments:
        anchor: int scalar tensor, index into `anchors` (a sentence that has a
            successor in its document), or a `(batch,)` vector of them: a batch is
            made at once, vectorised.
        seed: int tensor of shape `(2,)`, for the stateless random choices.

    Returns:
        A dict: `token_ids`, `segment_ids`, `padding_mask` (and, with a linker,
        `entity_ids`) `(sequence_length,)` int32 and `label` int32 scalar (with a
        leading batch axis for a vector `anchor`).

    Example:

    >>> import tensorflow as tf
    >>> from keras_attn.data import SentencePairSampler, WordPieceTokenizer
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "."]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=12)
    >>> sampler = SentencePairSampler(tokenizer, [["a b .", "c a ."], ["b b .", "c c ."]])
    >>> pair = sampler(0, seed=[1, 2])  # the pair anchored at sampler.anchors[0]
    >>> pair["token_ids"].shape, int(pair["label"]) in (0, 1)
    (TensorShape([12]), True)
    >>> sampler(tf.range(2), seed=[1, 2])["token_ids"].shape  # a batch of pairs
    TensorShape([2, 12])
    """

    def __init__(self, tokenizer, documents, objective="nsp", linker=None):
        if objective not in OBJECTIVES:
            raise ValueError(
                f"Expected `objective` in {OBJECTIVES}. Received: objective={objective!r}"
            )
        documents = [[s for s in document if s.strip()] for document in documents]
        documents = [d for d in documents if d]
        if len(documents) < 2 or not any(len(d) > 1 for d in documents):
            raise ValueError(
                "Expected at least two non-empty documents, one with two or more sentences. "
                f"Received: {len(documents)} document(s)"
            )
        self.tokenizer = tokenizer
        self.objective = objective
        self.budget = tokenizer.sequence_length - 3  # [CLS] A [SEP] B [SEP]
        sentences = [s for d in documents for s in d]
        tokens = tokenizer.tokenize(tf.constant(sentences))  # (sentences, (tokens))
        self._token_values = tokens.flat_values
        self.linker = linker
        if linker is not None:  # each piece's entity, gathered and packed as the pieces are
            from keras_attn.data.graph_linking import piece_entities

            self._entity_values = tf.concat([
                piece_entities(tokenizer, linker, tf.constant(sentences[i : i + 1024])).flat_values
                for i in range(0, len(sentences), 1024)
            ], axis=0)  # fmt: skip
        self._token_splits = tf.cast(tokens.row_splits, tf.int32)  # sentence -> first token
        lengths = [len(d) for d in documents]
        self._document_splits = tf.constant([0] + list(_cumsum(lengths)), tf.int32)
        document_of = [i for i, n in enumerate(lengths) for _ in range(n)]
        self._document_of = tf.constant(document_of, tf.int32)
        self.num_documents = len(documents)
        # Anchors: sentences followed by another sentence of their document.
        self.anchors = tf.constant(
            [s for s in range(len(sentences) - 1) if document_of[s] == document_of[s + 1]], tf.int32
        )

    def _end_within_budget(self, start, document_end, budget):
        """The last sentence end e (start < e <= document_end) with tokens[start:e] <= budget."""
        limit = tf.gather(self._token_splits, start) + budget
        end = tf.searchsorted(self._token_splits, limit, side="right") - 1
        return tf.clip_by_value(end, start + 1, document_end)

    def __call__(self, anchor, seed):
        anchor = tf.cast(tf.convert_to_tensor(anchor), tf.int32)
        if anchor.shape.rank == 0:
            return {key: value[0] for key, value in self._pairs(anchor[None], seed).items()}
        if anchor.shape.rank != 1:
            raise ValueError(
                "Expected `anchor` to be a scalar or of shape (batch,). Received: "
                f"shape={anchor.shape}"
            )
        return self._pairs(anchor, seed)

    def _pairs(self, anchor, seed):
        """All the pairs of a batch of anchors at once: index arithmetic, then one gather."""
        seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 4)
        count = tf.shape(anchor)[:1]
        start = tf.gather(self.anchors, anchor)  # sentence indices
        document = tf.gather(self._document_of, start)
        document_end = tf.gather(self._document_splits, document + 1)
        # Whole sentences from the anchor up to the budget, at least two of them.
        end = tf.maximum(self._end_within_budget(start, document_end, self.budget), start + 2)
        a_end = _uniform_integers(seeds[0], start + 1, end)
        a_range, b_range = (start, a_end), (a_end, end)
        coin = tf.random.stateless_uniform(count, seeds[1]) < 0.5
        if self.objective == "none":
            coin = tf.zeros_like(coin)
        elif self.objective == "sop":
            a_range, b_range = (
                tuple(tf.where(coin, b, a) for a, b in zip(a_range, b_range, strict=True)),
                tuple(tf.where(coin, a, b) for a, b in zip(a_range, b_range, strict=True)),
            )
        else:
            # A random other document, from a random sentence, up to the budget left.
            other = tf.random.stateless_uniform(
                count, seeds[2], maxval=self.num_documents - 1, dtype=tf.int32
            )
            other += tf.cast(other >= document, tf.int32)
            other_start = tf.gather(self._document_splits, other)
            other_end = tf.gather(self._document_splits, other + 1)
            random_start = _uniform_integers(seeds[3], other_start, other_end)
            left = self.budget - (
                tf.gather(self._token_splits, a_end) - tf.gather(self._token_splits, start)
            )
            random_end = self._end_within_budget(random_start, other_end, left)
            b_range = (
                tf.where(coin, random_start, b_range[0]),
                tf.where(coin, random_end, b_range[1]),
            )
        packed = self.tokenizer.pack([self._tokens(*a_range), self._tokens(*b_range)])
        packed["label"] = tf.cast(coin, tf.int32)
        if self.linker is not None:  # trimmed as the pieces are (the same lengths)
            segments = [self._tokens(*r, self._entity_values) for r in (a_range, b_range)]
            packed["entity_ids"] = pack_segments(segments, self.tokenizer.sequence_length, 0, 0, 0)[
                "token_ids"
            ]
        return packed

    def _tokens(self, start, end, values=None):
        """Sentences [start, end) of each row, as a ragged `(batch, None)` of token ids
        (or of `values`, one per token)."""
        positions = tf.ragged.range(
            tf.gather(self._token_splits, start), tf.gather(self._token_splits, end)
        )
        return tf.gather(self._token_values if values is None else values, positions)

    def dataset(self, seed, shuffle=True, batch_size=None, drop_remainder=True):
        """A `tf.data.Dataset` with one pair per anchor (one epoch); iterating it again
        draws new pairs (`rerandomize_each_iteration`), reproducibly from `seed`.

        Pairs are made a batch at a time (vectorised: a per-pair map costs far
        more CPU). With `batch_size` the dataset yields those batches, by default
        dropping the epoch's last partial one (`drop_remainder`), so every batch
        has a static shape; without it, single pairs (every one).
        """
        if batch_size is not None:
            check_positive_int("batch_size", batch_size)
        anchors = tf.data.Dataset.range(len(self.anchors))
        if shuffle:
            anchors = anchors.shuffle(len(self.anchors), seed=seed, reshuffle_each_iteration=True)
        anchors = anchors.batch(
            batch_size or _CHUNK, drop_remainder=batch_size is not None and drop_remainder
        )
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
        pairs = tf.data.Dataset.zip(anchors, seeds).map(
            lambda anchor, pair_seed: self._pairs(tf.cast(anchor, tf.int32), pair_seed),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return pairs if batch_size is not None else pairs.unbatch()


_CHUNK = 64  # pairs made per map call when the dataset yields single pairs


def _uniform_integers(seed, low, high):
    """Per-row uniform integers in [low, high) (high > low); the modulo bias is below 1e-7."""
    bits = tf.random.stateless_uniform(
        tf.shape(low), seed, minval=None, maxval=None, dtype=tf.int32
    )
    return low + tf.math.floormod(bits, high - low)


def _cumsum(values):
    total = 0
    for value in values:
        total += value
        yield total
