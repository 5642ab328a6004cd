"""GPT-1's input transformation in the graph: `[START] A [DELIM] B [EXTRACT]` packing."""

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attn.api_export import keras_attn_export
from keras_attn.data.wordpiece_tokenizer import WordPieceTokenizer

GPT1_TOKENS = ("[START]", "[DELIM]", "[EXTRACT]")


@keras_attn_export("keras_attn.data.GPT1Tokenizer", serializable=False)
class GPT1Tokenizer(WordPieceTokenizer):
    """A WordPiece tokenizer that packs as GPT-1's fine-tuning does.

    "All transformations include adding randomly initialized start and end tokens
    (<s>, <e>)"; text pairs are joined "with a delimiter token ($) in between"
    (Radford et al., 2018, §3.3): one text gives `[START] A [EXTRACT]`, a pair
    `[START] A [DELIM] B [EXTRACT]`, whose extract token's final state a
    `GPTFineTuner` classifies. The three tokens are vocabulary entries of their own
    (`with_gpt1_tokens` appends them, and `GPTFineTuner`'s backbone learns their
    embeddings); trimming is round-robin, as `WordPieceTokenizer`'s, and
    `gpt1_inputs` packs the same ids from id lists.

    Args:
        vocabulary: a `vocab.txt` path or a list of tokens holding BERT's special
            tokens and `[START]`, `[DELIM]`, `[EXTRACT]`.
        lowercase: lower-case and strip accents (uncased vocabularies).
        sequence_length: the packed length, the three tokens included.

    Call arguments:
        text: string tensor `(batch,)`.
        text_pair: optional string tensor `(batch,)`, the second segment.

    Returns:
        A dict of int32 `(batch, sequence_length)`: `token_ids`, `segment_ids` and
        `padding_mask` (1 for real tokens).

    Example:

    >>> from keras_attn.data import GPT1Tokenizer
    >>> vocab = GPT1Tokenizer.with_gpt1_tokens(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"])
    >>> tokenizer = GPT1Tokenizer(vocab, sequence_length=8)
    >>> tokenizer(["the cat"], ["cat sat"])["token_ids"].numpy().tolist()
    [[8, 5, 6, 9, 6, 7, 10, 0]]

    References:
        - [Radford et al., 2018](https://openai.com/research/language-unsupervised)
    """

    def __init__(self, vocabulary, lowercase=True, sequence_length=128, name=None):
        super().__init__(vocabulary, lowercase, sequence_length, name)
        missing = [token for token in GPT1_TOKENS if token not in self.vocabulary]
        if missing:
            raise ValueError(
                f"Expected the vocabulary to contain {list(GPT1_TOKENS)} "
                f"(`GPT1Tokenizer.with_gpt1_tokens`). Missing: {missing}"
            )
        self.start_id, self.delimiter_id, self.extract_id = (
            self.vocabulary.index(token) for token in GPT1_TOKENS
        )
        self.special_token_ids = sorted({*self.special_token_ids, *self.gpt1_token_ids})

    @property
    def gpt1_token_ids(self):
        """The ids of `[START]`, `[DELIM]` and `[EXTRACT]`."""
        return (self.start_id, self.delimiter_id, self.extract_id)

    @staticmethod
    def with_gpt1_tokens(vocabulary):
        """`vocabulary` (a list of tokens) with the three tokens it lacks appended."""
        vocabulary = list(vocabulary)
        return vocabulary + [token for token in GPT1_TOKENS if token not in vocabulary]

    def pack(self, segments):
        """Ragged segments -> `[START] A [DELIM] B [EXTRACT]`, trimmed and padded."""
        budget = self.sequence_length - 1 - len(segments)  # start, delimiters, extract
        segments = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)
        rows = segments[0].nrows()

        def column(value):
            return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([rows, 1]), value))

        ends = [self.delimiter_id] * (len(segments) - 1) + [self.extract_id]
        pieces, segment_ids = [column(self.start_id)], [column(0)]
        for index, (segment, end) in enumerate(zip(segments, ends, strict=True)):
            pieces += [tf.cast(segment, tf.int32), column(end)]
            segment_ids += [tf.zeros_like(tf.cast(segment, tf.int32)) + index, column(index)]
        token_ids, padding_mask = tf_text.pad_model_inputs(
            tf.concat(pieces, axis=1), max_seq_length=self.sequence_length, pad_value=self.pad_id
        )
        segment_ids, _ = tf_text.pad_model_inputs(
            tf.concat(segment_ids, axis=1), max_seq_length=self.sequence_length
        )
        return {
            "token_ids": tf.cast(token_ids, tf.int32),
            "segment_ids": tf.cast(segment_ids, tf.int32),
            "padding_mask": tf.cast(padding_mask, tf.int32),
        }
