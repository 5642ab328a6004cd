"""The fine-tuning tasks' preprocessors: text classification, tagging, span QA and
multiple choice (`keras_attn.models.preprocessors`)."""

import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.models.preprocessor_base import Preprocessor, as_strings


@keras_attn_export("keras_attn.models.TextClassifierPreprocessor")
class TextClassifierPreprocessor(Preprocessor):
    """Texts (or pairs of texts) -> a classifier's `token_ids`, `segment_ids` and
    `padding_mask`, as keras-hub's `TextClassifierPreprocessor`.

    One segment is packed `[CLS] A [SEP]`, a pair `[CLS] A [SEP] B [SEP]` (each family's
    own special tokens and trimming: the tokenizer's), padded to `sequence_length`. A
    family whose classifier reads other inputs says so in the registry
    (`classification_batch`: GPT-1's token ids, and the next tokens of its auxiliary
    language model as a second target).

    Args:
        tokenizer: the classifier's tokenizer (its `sequence_length` is the rows').
        family: the family whose files hold the tokenizer (default: found from it).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: a string or a batch of strings `(batch,)` (a list, an array, a tensor);
            a pair as a tuple `(texts, pairs)`, or a dict with `"text"` (and
            `"text_pair"`). A list is one batch, never a pair.
        y: labels `(batch,)` (optional), passed on.
        sample_weight: weights `(batch,)` (optional), passed on.

    Returns:
        The packed inputs, a dict of int32 `(batch, sequence_length)` (without the
        batch axis for one string), or `(x, y)` / `(x, y, sample_weight)`.

    Example:

    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.models import TextClassifierPreprocessor
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "fine", "film"]
    >>> preprocessor = TextClassifierPreprocessor(WordPieceTokenizer(vocab, sequence_length=8))
    >>> preprocessor(["A fine film"])["token_ids"].numpy().tolist()
    [[2, 5, 6, 7, 3, 0, 0, 0]]
    >>> x, y = preprocessor((["a film"], ["fine"]), [1])
    >>> x["segment_ids"].numpy().tolist(), y
    ([[0, 0, 0, 0, 1, 1, 0, 0]], [1])
    """

    def call(self, x, y=None, sample_weight=None):
        segments, single = self._segments(x)
        packed = self.tokenizer(*segments)
        packed = {key: packed[key] for key in ("token_ids", "segment_ids", "padding_mask")}
        from keras_attn.models import registry

        hook = registry.family(self.family).classification_batch
        if hook is not None:  # the family's classifier inputs (GPT-1's)
            labels = y if y is not None else tf.zeros_like(packed["token_ids"][:, 0])
            packed, labels = hook(packed, labels, self.tokenizer.pad_id)
            y = labels if y is not None else None
        if single:
            packed = tf.nest.map_structure(lambda t: t[0], packed)
        return self._outputs(packed, y, sample_weight)


def _ragged_strings(value, name):
    """`value` (nested lists, a RaggedTensor, a dense 2-D tensor) as a ragged string
    tensor `(batch, (items))`."""
    if isinstance(value, tf.RaggedTensor):
        tensor = value
    elif isinstance(value, tf.Tensor):
        tensor = tf.RaggedTensor.from_tensor(value) if value.shape.rank == 2 else value
    else:
        try:
            tensor = tf.ragged.constant(value)
        except (ValueError, TypeError):
            tensor = None
    if tensor is None or tensor.dtype != tf.string or tensor.shape.rank != 2:
        raise TypeError(
            f"Expected `{name}` as a batch of word lists (batch, (words)) of strings. "
            f"Received: {type(value).__name__} {str(value)[:80]!r}"
        )
    return tensor


@keras_attn_export("keras_attn.models.TokenClassifierPreprocessor")
class TokenClassifierPreprocessor(Preprocessor):
    """Sentences as word lists and a tag per word -> a token classifier's batch: each
    word's tag on its first piece (`keras_attn.data.tagging_inputs`, the BERT paper's
    NER alignment), the other pieces, the special tokens and the padding unscored.

    Args:
        tokenizer: the tagger's tokenizer (its `sequence_length` is the rows').
        family: the family whose files hold the tokenizer (default: found from it).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: words `(batch, (words))`: a list of word lists, or a RaggedTensor of
            strings.
        y: tag ids `(batch, (words))`, one per word (optional).
        sample_weight: a weight per sentence `(batch,)` (optional), multiplied into
            the first pieces' weights.

    Returns:
        The packed inputs (a dict of int32 `(batch, sequence_length)`), or with `y`
        `(x, labels, weights)`: each piece's tag and its weight, `(batch,
        sequence_length)`.

    Example:

    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.models import TokenClassifierPreprocessor
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "new", "york", "##er", "sings"]
    >>> preprocessor = TokenClassifierPreprocessor(WordPieceTokenizer(vocab, sequence_length=7))
    >>> x, labels, weights = preprocessor([["New", "Yorker", "sings"]], [[1, 2, 0]])
    >>> x["token_ids"].numpy().tolist(), labels.numpy().tolist()
    ([[2, 5, 6, 7, 8, 3, 0]], [[0, 1, 2, 0, 0, 0, 0]])
    >>> weights.numpy().tolist()
    [[0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0]]
    """

    def call(self, x, y=None, sample_weight=None):
        self._check_ready()
        from keras_attn.data import tagging_inputs

        words = _ragged_strings(x, "x")
        tags = None if y is None else tf.ragged.constant(y) if isinstance(y, list) else y
        inputs = tagging_inputs(self.tokenizer, words, tags)
        packed = {key: inputs[key] for key in ("token_ids", "segment_ids", "padding_mask")}
        if y is None:
            return packed
        weights = inputs["sample_weight"]
        if sample_weight is not None:
            weights *= tf.cast(tf.convert_to_tensor(sample_weight), tf.float32)[:, None]
        return packed, inputs["labels"], weights


def _two_parts(x, keys, names):
    """`x` as its two batches of strings: a tuple of the two, or a dict of `keys` (the
    error names them, and `names`, the tuple's parts)."""
    first, second = keys
    if isinstance(x, dict):
        if set(x) != set(keys):
            raise ValueError(
                f"Expected `x` as a dict of '{first}' and '{second}'. Received keys: {sorted(x)}"
            )
        x = (x[first], x[second])
    if not isinstance(x, tuple) or len(x) != 2:
        raise ValueError(
            f"Expected `x` as a tuple {names} or a dict of '{first}' and '{second}'. "
            f"Received: {type(x).__name__}"
        )
    return tuple(as_strings(part, "x") for part in x)


@keras_attn_export("keras_attn.models.SpanQAPreprocessor")
class SpanQAPreprocessor(Preprocessor):
    """Questions, contexts and answer spans -> a span-QA model's batch
    (`keras_attn.data.span_qa_inputs`): `[CLS] question [SEP] context [SEP]` (each
    family's own packing), the answer's first and last pieces as the labels, `[CLS]`
    for an unanswerable question or an answer cut off with the context, as BERT does
    for SQuAD 2.0.

    Args:
        tokenizer: the model's tokenizer, one with `tokenize_with_offsets` (WordPiece,
            RoBERTa's, DeBERTa-v3's).
        family: the family whose files hold the tokenizer (default: found from it).
        max_question_length: the question's pieces kept (64, as BERT's SQuAD runs).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: a tuple `(questions, contexts)` or a dict of `"question"` and `"context"`,
            each `(batch,)` strings.
        y: the answers as a tuple `(starts, ends)` or a dict of `"answer_start"` and
            `"answer_end"`: character offsets in the context (Python's, SQuAD's),
            the end just past the answer; a start of -1 for no answer (optional).
        sample_weight: `(batch,)` (optional), passed on.

    Returns:
        The packed inputs (a dict of int32 `(batch, sequence_length)`), or with `y`
        `(x, {"start_logits": first pieces, "end_logits": last pieces})` (and the
        weights).

    Example:

    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.models import SpanQAPreprocessor
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "sang", "ann", "?", "."]
    >>> preprocessor = SpanQAPreprocessor(WordPieceTokenizer(vocab, sequence_length=10))
    >>> x, y = preprocessor((["Who sang?"], ["Ann sang."]), ([0], [3]))
    >>> x["token_ids"].numpy().tolist()
    [[2, 5, 6, 8, 3, 7, 6, 9, 3, 0]]
    >>> y["start_logits"].numpy().tolist(), y["end_logits"].numpy().tolist()
    ([5], [5])
    """

    def __init__(self, tokenizer=None, family=None, max_question_length=64, **kwargs):
        super().__init__(tokenizer, family, **kwargs)
        if (
            not isinstance(max_question_length, int)
            or isinstance(max_question_length, bool)
            or max_question_length < 1
        ):
            raise ValueError(
                "Expected `max_question_length` an int >= 1. Received: "
                f"max_question_length={max_question_length!r}"
            )
        if tokenizer is not None and not hasattr(tokenizer, "tokenize_with_offsets"):
            raise TypeError(
                f"Expected a tokenizer with `tokenize_with_offsets` for span QA. Received: "
                f"{type(tokenizer).__name__}"
            )
        self.max_question_length = max_question_length

    def call(self, x, y=None, sample_weight=None):
        self._check_ready()
        from keras_attn.data import span_qa_inputs

        questions, contexts = _two_parts(x, ("question", "context"), "(questions, contexts)")
        starts = ends = None
        if y is not None:
            if isinstance(y, dict):
                y = (y.get("answer_start"), y.get("answer_end"))
            if not isinstance(y, tuple) or len(y) != 2 or any(part is None for part in y):
                raise ValueError(
                    "Expected `y` as a tuple (answer starts, answer ends) or a dict of "
                    "'answer_start' and 'answer_end'."
                )
            starts, ends = (tf.cast(tf.convert_to_tensor(part), tf.int64) for part in y)
            starts, ends = _bytes_before(contexts, starts), _bytes_before(contexts, ends)
        inputs = span_qa_inputs(
            self.tokenizer, questions, contexts, starts, ends, self.max_question_length
        )
        packed = {key: inputs[key] for key in ("token_ids", "segment_ids", "padding_mask")}
        if y is None:
            return packed
        labels = {"start_logits": inputs["start_positions"], "end_logits": inputs["end_positions"]}
        return self._outputs(packed, labels, sample_weight)

    def export_options(self, model):
        """The served questions are cut as in training (`max_question_length`)."""
        return {"max_question_length": self.max_question_length}

    def get_config(self):
        config = super().get_config()
        config.update({"max_question_length": self.max_question_length})
        return config


def _bytes_before(texts, characters):
    """Character offsets in `texts` -> UTF-8 byte offsets (-1 stays -1)."""
    lengths = tf.cast(tf.maximum(characters, 0), tf.int32)
    prefix = tf.strings.substr(texts, tf.zeros_like(lengths), lengths, "UTF8_CHAR")
    offsets = tf.cast(tf.strings.length(prefix, unit="BYTE"), tf.int64)
    return tf.where(characters < 0, characters, offsets)


@keras_attn_export("keras_attn.models.MultipleChoicePreprocessor")
class MultipleChoicePreprocessor(Preprocessor):
    """A context and its candidate endings -> a multiple-choice model's batch
    (`keras_attn.data.multiple_choice_inputs`): `[CLS] context [SEP] choice [SEP]` for
    every choice, as the BERT paper's SWAG setup.

    Args:
        tokenizer: the model's tokenizer (its `sequence_length` is the rows').
        family: the family whose files hold the tokenizer (default: found from it).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: a tuple `(contexts, choices)` or a dict of `"context"` and `"choices"`:
            contexts `(batch,)` strings, choices `(batch, num_choices)` strings.
        y: the right choice's index `(batch,)` (optional), passed on.
        sample_weight: `(batch,)` (optional), passed on.

    Returns:
        The packed inputs, a dict of int32 `(batch, num_choices, sequence_length)`,
        or `(x, y)` / `(x, y, sample_weight)`.

    Example:

    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.models import MultipleChoicePreprocessor
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "he", "ate", "an", "apple"]
    >>> preprocessor = MultipleChoicePreprocessor(WordPieceTokenizer(vocab, sequence_length=7))
    >>> x = preprocessor((["he ate"], [["an apple", "apple"]]))
    >>> x["token_ids"].numpy().tolist()
    [[[2, 5, 6, 3, 7, 8, 3], [2, 5, 6, 3, 8, 3, 0]]]
    """

    def call(self, x, y=None, sample_weight=None):
        self._check_ready()
        from keras_attn.data import multiple_choice_inputs

        contexts, choices = _two_parts(x, ("context", "choices"), "(contexts, choices)")
        packed = multiple_choice_inputs(self.tokenizer, contexts, choices)
        return self._outputs(packed, y, sample_weight)
