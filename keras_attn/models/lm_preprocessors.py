"""The language models' preprocessors: masked LM (dynamic masking), causal LM, and the
encoder-decoder's translation pairs (`keras_attn.models.preprocessors`)."""

import math
import pathlib

import numpy as np
import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.models.preprocessor_base import Preprocessor, as_strings, ragged_ids


@keras_attn_export("keras_attn.models.MaskedLMPreprocessor")
class MaskedLMPreprocessor(Preprocessor):
    """Texts -> a masked-LM batch, masked anew each time (dynamic masking, Liu et al.,
    2019), as keras-hub's `MaskedLMPreprocessor`: pre-training is `fit(strings)`.

    The texts are packed as a classifier's are (`[CLS] A [SEP]`, or a pair), then
    `keras_attn.data.MaskedLMMasker` chooses `mask_selection_rate` of the tokens that
    are not special (rounded, at least one, at most `mask_selection_length`) and
    replaces `mask_token_rate` of them with the mask token and `random_token_rate`
    with a random token that is not special. `x` holds the corrupted `token_ids`,
    `segment_ids`, `padding_mask` and the `masked_positions`; `y` the original ids
    there and `sample_weight` 1 for each real prediction (0 for the padding of the
    positions), both under `"mlm_logits"`, the output of the masked-LM models
    (`BertPretrainer` with `sentence_objective="none"`, `DebertaV3MaskedLM`).

    The masks are drawn from `seed`: `fit`, `evaluate` and `predict` on strings draw
    each batch's from a `tf.data.Dataset.random(seed)` beside the data, new ones each
    epoch, the same ones for the same seed; a call without `seed` (e.g.
    `dataset.map(preprocessor)`) draws them from TensorFlow's random state.

    Args:
        tokenizer: the model's tokenizer (its `sequence_length` is the rows').
        family: the family whose files hold the tokenizer (default: found from it).
        mask_selection_rate: the share of the tokens that are not special to predict
            (BERT: 0.15).
        mask_token_rate: of those, the share replaced by the mask token (0.8).
        random_token_rate: of those, the share replaced by a random token (0.1); the
            rest are left as they are.
        mask_selection_length: the predictions a row holds at most (the length of
            `masked_positions`); `None`: `ceil(mask_selection_rate *
            sequence_length)`, which never cuts a row short.
        seed: an int, the masks' seed (`None`: different masks every run).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: a string or a batch of strings `(batch,)`, or a pair as a tuple `(texts,
            pairs)` (or a dict with `"text"` and `"text_pair"`).
        y: must be `None`: the targets are the masked tokens.
        sample_weight: must be `None`.
        seed: an int tensor `(2,)`, this call's masks (default: drawn).

    Returns:
        `(x, y, sample_weight)`: `x` a dict of int32 `token_ids`, `segment_ids`,
        `padding_mask` `(batch, sequence_length)` and `masked_positions` `(batch,
        mask_selection_length)`; `y` `{"mlm_logits": masked ids}` and `sample_weight`
        `{"mlm_logits": weights}`, `(batch, mask_selection_length)`.

    Example:

    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.models import MaskedLMPreprocessor
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "fine", "film"]
    >>> preprocessor = MaskedLMPreprocessor(
    ...     WordPieceTokenizer(vocab, sequence_length=8), mask_selection_rate=0.5,
    ...     mask_token_rate=1.0, random_token_rate=0.0)
    >>> x, y, weights = preprocessor(["a fine film"], seed=[1, 2])
    >>> x["token_ids"].numpy().tolist(), x["masked_positions"].numpy().tolist()
    ([[2, 4, 4, 7, 3, 0, 0, 0]], [[2, 1, 0, 0]])
    >>> y["mlm_logits"].numpy().tolist(), weights["mlm_logits"].numpy().tolist()
    ([[6, 5, 0, 0]], [[1.0, 1.0, 0.0, 0.0]])
    """

    draws_masks = True  # `preprocessed` gives each batch its seed

    def __init__(
        self,
        tokenizer=None,
        family=None,
        mask_selection_rate=0.15,
        mask_token_rate=0.8,
        random_token_rate=0.1,
        mask_selection_length=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(tokenizer, family, **kwargs)
        if not isinstance(mask_selection_rate, (int, float)) or not 0 < mask_selection_rate <= 1:
            raise ValueError(
                "Expected `mask_selection_rate` in (0, 1]. Received: "
                f"mask_selection_rate={mask_selection_rate!r}"
            )
        rates = (mask_token_rate, random_token_rate)
        if not all(isinstance(r, (int, float)) and r >= 0 for r in rates) or sum(rates) > 1:
            raise ValueError(
                "Expected non-negative `mask_token_rate` and `random_token_rate` summing to "
                f"at most 1. Received: mask_token_rate={mask_token_rate!r}, "
                f"random_token_rate={random_token_rate!r}"
            )
        if mask_selection_length is not None and (
            not isinstance(mask_selection_length, int)
            or isinstance(mask_selection_length, bool)
            or mask_selection_length < 1
        ):
            raise ValueError(
                "Expected `mask_selection_length` an int >= 1 or None. Received: "
                f"mask_selection_length={mask_selection_length!r}"
            )
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise TypeError(f"Expected `seed` an int or None. Received: seed={seed!r}")
        self.mask_selection_rate = float(mask_selection_rate)
        self.mask_token_rate = float(mask_token_rate)
        self.random_token_rate = float(random_token_rate)
        self.mask_selection_length = mask_selection_length or math.ceil(
            self.mask_selection_rate * self.sequence_length
        )
        self._given_length = mask_selection_length
        self.seed = seed
        self._masker = None

    def masker(self):
        """The `MaskedLMMasker` that draws this preprocessor's masks."""
        self._check_ready()
        if self._masker is None:
            from keras_attn.data import MaskedLMMasker

            with tf.init_scope():  # its constants eager, whether first made in a map or not
                self._masker = MaskedLMMasker(
                    len(self.tokenizer.vocabulary),
                    self.tokenizer.mask_id,
                    self.tokenizer.special_token_ids,
                    selection_rate=self.mask_selection_rate,
                    mask_token_rate=self.mask_token_rate,
                    random_token_rate=self.random_token_rate,
                    max_predictions_per_seq=self.mask_selection_length,
                )
        return self._masker

    def call(self, x, y=None, sample_weight=None, seed=None):
        if y is not None or sample_weight is not None:
            raise ValueError(
                "Expected no `y` or `sample_weight`: a masked-LM batch's targets are its "
                "masked tokens. Received: y or sample_weight"
            )
        segments, single = self._segments(x)
        packed = self.tokenizer(*segments)
        if seed is None:
            seed = tf.random.uniform([2], maxval=tf.int64.max, dtype=tf.int64)
        masked = self.masker()(packed["token_ids"], seed)
        x = {
            "token_ids": masked["token_ids"],
            "segment_ids": packed["segment_ids"],
            "padding_mask": packed["padding_mask"],
            "masked_positions": masked["masked_positions"],
        }
        y = {"mlm_logits": masked["masked_ids"]}
        sample_weight = {"mlm_logits": masked["masked_weights"]}
        if single:
            x, y, sample_weight = tf.nest.map_structure(lambda t: t[0], (x, y, sample_weight))
        return x, y, sample_weight

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mask_selection_rate": self.mask_selection_rate,
                "mask_token_rate": self.mask_token_rate,
                "random_token_rate": self.random_token_rate,
                "mask_selection_length": self._given_length,
                "seed": self.seed,
            }
        )
        return config


@keras_attn_export("keras_attn.models.CausalLMPreprocessor")
class CausalLMPreprocessor(Preprocessor):
    """Texts -> a causal language model's next-token batch, as keras-hub's
    `CausalLMPreprocessor`: `fit(strings)` trains it, `generate(strings)` continues them.

    Each text becomes `start + pieces + end`, cut to `sequence_length + 1` tokens and
    right-padded; `x` is the first `sequence_length` of them, `y` the last
    `sequence_length` (each position's next token) and `sample_weight` 1 on every real
    one. The start and end tokens are the ones our language models learn between texts:
    a `keras-attn lm` run's WordPiece `[SEP]` (the token after every sentence of its
    corpus, and the start of an empty prompt), GPT-2's `<|endoftext|>` (also its
    padding, hence the weights: they come from the lengths, not from the ids).

    Args:
        tokenizer: a `WordPieceTokenizer` (a `keras-attn lm` run's) or GPT-2's byte-level
            BPE (`keras_attn.data.gpt2_tokenizer`).
        family: the family whose files hold the tokenizer (default: found from it).
        sequence_length: the tokens of `x` (`None`: the tokenizer's, else 128).
        add_start_token: put the start token before each text.
        add_end_token: put the end token after each text (not for `generate`'s prompts).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: a string or a batch of strings `(batch,)`.
        y: must be `None`: the targets are the next tokens.
        sample_weight: must be `None`.

    Returns:
        `(x, y, sample_weight)`: int32 token ids `(batch, sequence_length)` (right-padded
        with the pad id), int32 next tokens and float32 weights of the same shape.

    Example:

    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.models import CausalLMPreprocessor
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "fine", "film"]
    >>> preprocessor = CausalLMPreprocessor(WordPieceTokenizer(vocab), sequence_length=6)
    >>> x, y, weights = preprocessor(["A fine film"])
    >>> x.numpy().tolist(), y.numpy().tolist()
    ([[3, 5, 6, 7, 3, 0]], [[5, 6, 7, 3, 0, 0]])
    >>> weights.numpy().tolist()
    [[1.0, 1.0, 1.0, 1.0, 0.0, 0.0]]
    """

    def __init__(
        self,
        tokenizer=None,
        family=None,
        sequence_length=None,
        add_start_token=True,
        add_end_token=True,
        **kwargs,
    ):
        super().__init__(tokenizer, family, **kwargs)
        if sequence_length is not None:
            if (
                not isinstance(sequence_length, int)
                or isinstance(sequence_length, bool)
                or sequence_length < 1
            ):
                raise ValueError(
                    "Expected `sequence_length` an int >= 1. Received: "
                    f"sequence_length={sequence_length!r}"
                )
            self._tokenizer_config["sequence_length"] = sequence_length
        self.add_start_token = bool(add_start_token)
        self.add_end_token = bool(add_end_token)

    def special_ids(self):
        """`(start, end, pad)`: the ids a text starts and ends with, and the padding's."""
        self._check_ready()
        tokenizer = self.tokenizer
        ids = [getattr(tokenizer, f"{name}_token_id", None) for name in ("start", "end", "pad")]
        if None not in ids:  # a tokenizer that names all three (a GGUF file's)
            return tuple(int(i) for i in ids)
        if hasattr(tokenizer, "end_token_id") and hasattr(tokenizer, "merges"):  # GPT-2's
            end = int(tokenizer.end_token_id)
            return end, end, end
        return int(tokenizer.sep_id), int(tokenizer.sep_id), int(tokenizer.pad_id)

    def _packed(self, texts, add_end_token, length):
        """Strings `(batch,)` -> `(ids, lengths)`: each row `start + pieces (+ end)`,
        cut to `length` and right-padded."""
        start, end, pad = self.special_ids()
        pieces = ragged_ids(self.tokenizer, texts)
        batch = tf.shape(texts)[0]
        if self.add_start_token:
            pieces = tf.concat([tf.fill([batch, 1], start), pieces], axis=1)
        if add_end_token:
            pieces = tf.concat([pieces, tf.fill([batch, 1], end)], axis=1)
        pieces = pieces[:, :length]
        return pieces.to_tensor(default_value=pad, shape=[None, length]), pieces.row_lengths()

    def call(self, x, y=None, sample_weight=None):
        if y is not None or sample_weight is not None:
            raise ValueError(
                "Expected no `y` or `sample_weight`: a causal-LM batch's targets are its "
                "next tokens. Received: y or sample_weight"
            )
        self._check_ready()
        texts = as_strings(x, "x")
        single = texts.shape.rank == 0
        if single:
            texts = texts[None]
        length = self.sequence_length + 1
        ids, lengths = self._packed(texts, self.add_end_token, length)
        real = tf.sequence_mask(lengths, length, tf.float32)
        x, y, sample_weight = ids[:, :-1], ids[:, 1:], real[:, 1:]
        if single:
            x, y, sample_weight = x[0], y[0], sample_weight[0]
        return x, y, sample_weight

    def generate_preprocess(self, prompts):
        """Prompt strings `(batch,)` -> a list of id lists: `start + pieces` (no end
        token), each cut to `sequence_length` tokens, for `generate`."""
        texts = as_strings(prompts, "prompt")
        ids, lengths = self._packed(texts, False, self.sequence_length)
        return [row[:n] for row, n in zip(ids.numpy().tolist(), lengths.numpy(), strict=True)]

    def generate_postprocess(self, token_ids, prompt_lengths):
        """Generated rows `(batch, length)` -> strings: each row's tokens up to (not
        with) the first end token after its prompt, special tokens left out."""
        start, end, pad = self.special_ids()
        rows = []
        for row, length in zip(np.asarray(token_ids).tolist(), prompt_lengths, strict=True):
            generated = row[length:]
            if end in generated:
                generated = generated[: generated.index(end)]
            rows.append(
                [t for t in row[:length] + generated if t not in (start, end, pad)] or [pad]
            )
        width = max(len(r) for r in rows)
        padded = [r + [pad] * (width - len(r)) for r in rows]
        if hasattr(self.tokenizer, "detokenize_to_tensor"):
            texts = self.tokenizer.detokenize_to_tensor(padded)
        else:  # keras-hub's: pad ids (its end token) are the ones left out above
            texts = self.tokenizer.detokenize(
                tf.ragged.boolean_mask(tf.constant(padded), tf.not_equal(padded, pad))
            )
        texts = texts.numpy().tolist() if hasattr(texts, "numpy") else texts
        return [t.decode("utf-8") if isinstance(t, bytes) else t for t in texts]

    def export_options(self, model):
        """The served prompts start as `generate`'s (`add_start_token`), and decoding
        stops at the end token, `sequence_length` tokens at most (within the model's
        positions): the served text is `generate`'s."""
        from keras_attn.models.generation_config import GenerationConfig

        bound = getattr(model, "max_sequence_length", None) or self.sequence_length
        generation = GenerationConfig(
            max_length=min(self.sequence_length, bound), end_token_id=self.special_ids()[1]
        )
        return {"start_token": self.add_start_token, "generation": generation}

    def get_config(self):
        config = super().get_config()
        config.update(
            {"add_start_token": self.add_start_token, "add_end_token": self.add_end_token}
        )
        return config


@keras_attn_export("keras_attn.models.Seq2SeqPreprocessor")
class Seq2SeqPreprocessor(Preprocessor):
    """Source texts and their translations -> an encoder-decoder's teacher-forced batch,
    as `keras-attn seq2seq` trains `TransformerSeq2Seq`: the source's pieces (no special
    tokens), the target as `[CLS] pieces [SEP]` of the target vocabulary, the decoder
    reading it up to the last token and predicting it from the second.

    Rows longer than the budget are cut (the source to `sequence_length` pieces, the
    target to `target_sequence_length + 1` tokens, its `[SEP]` then lost), where the
    command line leaves such pairs out: a preprocessor maps batches and cannot drop rows.

    Args:
        tokenizer: the source side's `WordPieceTokenizer` (its `sequence_length`: the
            source's pieces).
        target_tokenizer: the target side's (its `sequence_length`: the decoder's
            tokens).
        family: `"seq2seq"` (the default).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        x: source texts `(batch,)` (or one string).
        y: target texts `(batch,)` (optional; without, the decoder gets `[CLS]` alone).
        sample_weight: `(batch,)` (optional), multiplied into the tokens' weights.

    Returns:
        `{"encoder_token_ids", "decoder_token_ids"}` (int32, right-padded with 0), and
        with `y` the next target ids and their weights (1 on real tokens).

    Example:

    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.models import Seq2SeqPreprocessor
    >>> special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> source = WordPieceTokenizer(special + ["guten", "tag"], sequence_length=4)
    >>> target = WordPieceTokenizer(special + ["good", "day"], sequence_length=4)
    >>> x, y, weights = Seq2SeqPreprocessor(source, target)(["Guten Tag"], ["Good day"])
    >>> x["encoder_token_ids"].numpy().tolist(), x["decoder_token_ids"].numpy().tolist()
    ([[5, 6, 0, 0]], [[2, 5, 6, 3]])
    >>> y.numpy().tolist(), weights.numpy().tolist()
    ([[5, 6, 3, 0]], [[1.0, 1.0, 1.0, 0.0]])
    """

    FILES = ("source_vocab.txt", "target_vocab.txt")  # as a `keras-attn seq2seq` run's

    def __init__(self, tokenizer=None, target_tokenizer=None, family="seq2seq", **kwargs):
        target_config = kwargs.pop("target_tokenizer_config", None) or {}
        super().__init__(tokenizer, family, **kwargs)
        if (tokenizer is None) != (target_tokenizer is None):
            raise ValueError(
                "Expected both `tokenizer` (the source's) and `target_tokenizer`, or neither "
                "(a saved preprocessor being loaded)."
            )
        for name, value in (("tokenizer", tokenizer), ("target_tokenizer", target_tokenizer)):
            if value is not None and not hasattr(value, "cls_id"):
                raise TypeError(
                    f"Expected `{name}` to be a WordPieceTokenizer. Received: "
                    f"{type(value).__name__}"
                )
        self.target_tokenizer = target_tokenizer
        if target_tokenizer is not None:
            target_config = {
                "sequence_length": int(target_tokenizer.sequence_length),
                "lowercase": bool(target_tokenizer.lowercase),
                "strip_accents": target_tokenizer.strip_accents,
            }
        self._target_config = {
            "sequence_length": target_config.get("sequence_length", 128),
            "lowercase": target_config.get("lowercase", True),
            "strip_accents": target_config.get("strip_accents"),
        }

    @property
    def target_sequence_length(self):
        """The decoder's tokens: the target tokenizer's `sequence_length`."""
        return self._target_config["sequence_length"]

    def save_assets(self, dir_path):
        """Both vocabularies, `source_vocab.txt` and `target_vocab.txt`."""
        from keras_attn.data.wordpiece_tokenizer import write_vocabulary

        self._check_ready()
        for name, tokenizer in zip(
            self.FILES, (self.tokenizer, self.target_tokenizer), strict=True
        ):
            write_vocabulary(tokenizer.vocabulary, pathlib.Path(dir_path) / name)

    def load_assets(self, dir_path):
        """Both tokenizers read back, each with its saved settings."""
        from keras_attn.data import WordPieceTokenizer

        folder = pathlib.Path(dir_path)
        missing = [name for name in self.FILES if not (folder / name).is_file()]
        if missing:
            raise ValueError(
                f"The saved {type(self).__name__}'s assets lack its vocabularies: {missing}"
            )
        tokenizers = [
            WordPieceTokenizer(folder / name, **settings)
            for name, settings in zip(
                self.FILES, (self._tokenizer_config, self._target_config), strict=True
            )
        ]
        self.tokenizer, self.target_tokenizer = tokenizers

    def get_config(self):
        config = super().get_config()
        config.update({"target_tokenizer_config": dict(self._target_config)})
        return config

    def _source(self, texts):
        ids = ragged_ids(self.tokenizer, texts)[:, : self.sequence_length]
        return ids.to_tensor(
            default_value=self.tokenizer.pad_id, shape=[None, self.sequence_length]
        )

    def source_ids(self, texts):
        """Source strings -> a list of id lists (cut to `sequence_length`), for
        `generate`; an empty text is `[UNK]` (the encoder needs a token)."""
        ids = ragged_ids(self.tokenizer, as_strings(texts, "encoder_token_ids"))
        return [row[: self.sequence_length] or [self.tokenizer.unk_id] for row in ids.to_list()]

    def generation_length(self, model):
        """`generate`'s default target length: the decoder's tokens plus `[CLS]`, within
        the model's positions."""
        return min(self.target_sequence_length + 1, model.max_sequence_length)

    def export_options(self, model):
        """The export translates as `generate` does: the target tokenizer, decoding
        stopped at its `[SEP]`, `generation_length` tokens at most."""
        from keras_attn.models.generation_config import GenerationConfig

        generation = GenerationConfig(
            max_length=self.generation_length(model), end_token_id=self.target_tokenizer.sep_id
        )
        return {"target_tokenizer": self.target_tokenizer, "generation": generation}

    def call(self, x, y=None, sample_weight=None):
        self._check_ready()
        texts = as_strings(x, "x")
        single = texts.shape.rank == 0
        if single:
            texts = texts[None]
        source = self._source(texts)
        target = self.target_tokenizer
        batch = tf.shape(texts)[0]
        if y is None:
            x = {
                "encoder_token_ids": source,
                "decoder_token_ids": tf.fill([batch, 1], target.cls_id),
            }
            return tf.nest.map_structure(lambda t: t[0], x) if single else x
        targets = as_strings(y, "y")
        if single:
            targets = targets[None]
        pieces = ragged_ids(target, targets)
        rows = tf.concat(
            [tf.fill([batch, 1], target.cls_id), pieces, tf.fill([batch, 1], target.sep_id)], 1
        )
        length = self.target_sequence_length + 1
        rows = rows[:, :length].to_tensor(default_value=target.pad_id, shape=[None, length])
        labels = rows[:, 1:]
        weights = tf.cast(labels != target.pad_id, tf.float32)
        if sample_weight is not None:
            weights *= tf.cast(tf.reshape(sample_weight, [-1, 1]), tf.float32)
        x = {"encoder_token_ids": source, "decoder_token_ids": rows[:, :-1]}
        if single:
            x, labels, weights = tf.nest.map_structure(lambda t: t[0], (x, labels, weights))
        return x, labels, weights
