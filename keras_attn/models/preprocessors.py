"""Preprocessors: raw text in, a task model's inputs out, as Keras layers that run in
`tf.data`, as keras-hub's do.

A preprocessor holds one of our tokenizers (WordPiece, RoBERTa's byte-level BPE,
DeBERTa-v3's SentencePiece, GPT-1's) and turns a batch of strings (and labels) into
what its task model takes: `preprocessor(x, y=None, sample_weight=None)` returns `x`
packed, or `(x, y)` / `(x, y, sample_weight)` when they are given, so
`dataset.map(preprocessor)` feeds `fit` directly. Task models built `from_preset` carry
theirs (`model.preprocessor`), and their `fit`, `evaluate` and `predict` then take
strings (`keras_attn.models.pipeline`). Every task kind packs its segments with the one
packer (`keras_attn.data.segment_packing`), through the tokenizer.

Saved with a model (`.keras`) or alone, a preprocessor keeps its settings in its config
and its tokenizer's files (`vocab.txt`, `vocab.json` + `merges.txt`, `spm.model`) as
the layer's assets; its family (`keras_attn.models.registry`) says which files.
"""

import math
import pathlib

import keras
import numpy as np
import tensorflow as tf

from keras_attn.api_export import keras_attn_export


def _as_strings(value, name):
    """`value` (a str, a list or array of str, a string tensor) as a string tensor."""
    if isinstance(value, (tf.Tensor, tf.RaggedTensor)):
        if value.dtype != tf.string:
            raise TypeError(
                f"Expected `{name}` to hold strings. Received: a tensor of {value.dtype.name}"
            )
        return value
    try:
        tensor = tf.convert_to_tensor(value)
    except (ValueError, TypeError):
        tensor = None
    if tensor is None or tensor.dtype != tf.string:
        raise TypeError(
            f"Expected `{name}` to be a string or a batch of strings. Received: "
            f"{type(value).__name__} {str(value)[:80]!r}"
        )
    return tensor


@keras_attn_export("keras_attn.models.Preprocessor")
class Preprocessor(keras.layers.Layer):
    """Base of the preprocessors: a tokenizer, its family's files, and the rules of
    calling a preprocessing layer (strings in, no conversion to the backend's tensors,
    no weights).

    Args:
        tokenizer: one of `keras_attn`'s tokenizers (`WordPieceTokenizer`,
            `RobertaTokenizer`, `DebertaV3Tokenizer`, `GPT1Tokenizer`); `None` only
            while a saved preprocessor is being loaded (its files then give it).
        family: the model family whose tokenizer files hold it (`"bert"`,
            `"roberta"`, ...); default: the family that reads the tokenizer's class.
        **kwargs: `keras.layers.Layer` arguments (`name`).

    Call arguments:
        x, y, sample_weight: as each task's preprocessor takes them (`x` raw text).

    Returns:
        The task model's inputs, or `(x, y)` / `(x, y, sample_weight)` when given.

    Example:

    >>> import tempfile
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.models import Preprocessor
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "film"])
    >>> preprocessor = Preprocessor(tokenizer)
    >>> preprocessor.family, preprocessor.sequence_length
    ('bert', 128)
    >>> sorted(p.name for p in preprocessor.save_to_folder(tempfile.mkdtemp()).iterdir())
    ['vocab.txt']
    """

    def __init__(self, tokenizer=None, family=None, **kwargs):
        from keras_attn.models import registry

        config = kwargs.pop("tokenizer_config", None) or {}
        super().__init__(**kwargs)
        if tokenizer is not None and not callable(getattr(tokenizer, "tokenize", None)):
            raise TypeError(
                "Expected `tokenizer` to be one of keras_attn's tokenizers. Received: "
                f"{type(tokenizer).__name__}"
            )
        if family is None and tokenizer is not None:
            entry = registry.family_of_tokenizer(tokenizer)
            if entry is None:
                raise ValueError(
                    f"No model family reads a {type(tokenizer).__name__}: give `family`."
                )
            family = entry.name
        if family is not None:
            registry.family(family)  # a ValueError listing the families
        self.family = family
        self.tokenizer = tokenizer
        if tokenizer is not None:  # its settings; else a saved preprocessor's config
            config = {  # keras-hub's GPT-2 tokenizer packs nothing: no length of its own
                "sequence_length": int(getattr(tokenizer, "sequence_length", None) or 128),
                "lowercase": bool(getattr(tokenizer, "lowercase", True)),
                "strip_accents": getattr(tokenizer, "strip_accents", None),
                "truncate": getattr(tokenizer, "truncate", None),
            }
        self._tokenizer_config = {
            "sequence_length": config.get("sequence_length", 128),
            "lowercase": config.get("lowercase", True),
            "strip_accents": config.get("strip_accents"),
        }
        if config.get("truncate") is not None:  # a pair's trimming, where it is a choice
            self._tokenizer_config["truncate"] = config["truncate"]
        # A preprocessing layer: strings pass as they are; nothing to build.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    @property
    def sequence_length(self):
        """The packed length of every row (the tokenizer's)."""
        return self._tokenizer_config["sequence_length"]

    def _files(self):
        """The family's `TokenizerFiles` that keep this tokenizer (GPT's: a run's
        WordPiece `vocab.txt`, or GPT-2's byte-level `vocab.json` and `merges.txt`)."""
        from keras_attn.models import registry

        files = registry.family(self.family).tokenizer
        if self.tokenizer is None:
            return files
        return files.for_tokenizer(self.tokenizer) or files

    def _check_ready(self):
        if self.tokenizer is None:
            raise ValueError(
                f"{type(self).__name__} has no tokenizer: build it with one, or load a "
                "saved preprocessor whole (its assets hold the tokenizer's files)."
            )

    def save_assets(self, dir_path):
        """The tokenizer's files, written into the layer's assets folder (`.keras` files)."""
        self._check_ready()
        self._files().save(self.tokenizer, pathlib.Path(dir_path))

    def load_assets(self, dir_path):
        """The tokenizer read back from the layer's assets folder."""
        folder = pathlib.Path(dir_path)
        files = self._files().in_folder(folder)
        missing = files.missing(folder)
        if missing:
            raise ValueError(
                f"The saved {type(self).__name__}'s assets lack its tokenizer's files: {missing}"
            )
        settings = self._tokenizer_config
        # Accents kept or stripped apart from case: a WordPiece vocabulary read as
        # keras-hub's BertTokenizer reads it (its loader alone takes the setting).
        apart = settings.get("strip_accents") not in (None, settings["lowercase"])
        options = {"strip_accents": settings["strip_accents"]} if apart else {}
        if "truncate" in settings:
            options["truncate"] = settings["truncate"]
        self.tokenizer = files.load(
            folder, settings["sequence_length"], settings["lowercase"], **options
        )

    def save_to_folder(self, folder):
        """The tokenizer's files into `folder` (as `save_assets`); returns the folder."""
        folder = pathlib.Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.save_assets(folder)
        return folder

    def get_config(self):
        config = super().get_config()
        config.update({"family": self.family, "tokenizer_config": dict(self._tokenizer_config)})
        return config

    def _segments(self, x):
        """`x` (texts; a pair as a tuple or a `text`/`text_pair` dict) -> `(segments,
        single)`: one or two string tensors `(batch,)`, and whether `x` was one string."""
        self._check_ready()
        if isinstance(x, dict):
            unknown = sorted(set(x) - {"text", "text_pair"})
            if "text" not in x or unknown:
                raise ValueError(
                    "Expected `x` as a dict to have 'text' (and 'text_pair'). Received "
                    f"keys: {sorted(x)}"
                )
            segments = [x["text"]] + ([x["text_pair"]] if "text_pair" in x else [])
        elif isinstance(x, tuple):
            if not 1 <= len(x) <= 2:
                raise ValueError(
                    "Expected `x` as a tuple to hold one or two segments (texts, pairs). "
                    f"Received: a tuple of {len(x)}"
                )
            segments = list(x)
        else:
            segments = [x]
        segments = [_as_strings(s, "x") for s in segments]
        single = segments[0].shape.rank == 0
        if single:
            segments = [s[None] for s in segments]
        return segments, single

    def export_options(self, model):
        """The export options that make `model`'s export read text as this
        preprocessor does (`Task.export` passes them; none by default)."""
        return {}

    def _outputs(self, x, y=None, sample_weight=None):
        """`x` or `(x, y[, sample_weight])`, each as keras-hub's preprocessors return."""
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)


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


def _ragged_ids(tokenizer, text):
    """`tokenizer.tokenize(text)` as a RaggedTensor of int32 `(batch, (pieces))`, for our
    tokenizers and keras-hub's (whose eager results are Python lists)."""
    ids = tokenizer.tokenize(text)
    if isinstance(ids, tf.RaggedTensor):
        return tf.cast(ids, tf.int32)
    if isinstance(ids, tf.Tensor):
        return tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int32))
    return tf.ragged.constant(ids, tf.int32, ragged_rank=1, inner_shape=())


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
        if hasattr(tokenizer, "end_token_id") and hasattr(tokenizer, "merges"):  # GPT-2's
            end = int(tokenizer.end_token_id)
            return end, end, end
        return int(tokenizer.sep_id), int(tokenizer.sep_id), int(tokenizer.pad_id)

    def _packed(self, texts, add_end_token, length):
        """Strings `(batch,)` -> `(ids, lengths)`: each row `start + pieces (+ end)`,
        cut to `length` and right-padded."""
        start, end, pad = self.special_ids()
        pieces = _ragged_ids(self.tokenizer, texts)
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
        texts = _as_strings(x, "x")
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
        texts = _as_strings(prompts, "prompt")
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
        from keras_attn.models import GenerationConfig

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


def _question_and_context(x):
    """`x` as `(questions, contexts)`: a tuple of the two, or a dict of `"question"`
    and `"context"`, each a batch of strings."""
    if isinstance(x, dict):
        if set(x) != {"question", "context"}:
            raise ValueError(
                f"Expected `x` as a dict of 'question' and 'context'. Received keys: {sorted(x)}"
            )
        x = (x["question"], x["context"])
    if not isinstance(x, tuple) or len(x) != 2:
        raise ValueError(
            "Expected `x` as a tuple (questions, contexts) or a dict of 'question' and "
            f"'context'. Received: {type(x).__name__}"
        )
    return tuple(_as_strings(part, "x") for part in x)


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

        questions, contexts = _question_and_context(x)
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

        if isinstance(x, dict):
            if set(x) != {"context", "choices"}:
                raise ValueError(
                    f"Expected `x` as a dict of 'context' and 'choices'. Received keys: {sorted(x)}"
                )
            x = (x["context"], x["choices"])
        if not isinstance(x, tuple) or len(x) != 2:
            raise ValueError(
                "Expected `x` as a tuple (contexts, choices) or a dict of 'context' and "
                f"'choices'. Received: {type(x).__name__}"
            )
        contexts, choices = _as_strings(x[0], "x"), _as_strings(x[1], "x")
        packed = multiple_choice_inputs(self.tokenizer, contexts, choices)
        return self._outputs(packed, y, sample_weight)


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
        ids = _ragged_ids(self.tokenizer, texts)[:, : self.sequence_length]
        return ids.to_tensor(
            default_value=self.tokenizer.pad_id, shape=[None, self.sequence_length]
        )

    def source_ids(self, texts):
        """Source strings -> a list of id lists (cut to `sequence_length`), for
        `generate`; an empty text is `[UNK]` (the encoder needs a token)."""
        ids = _ragged_ids(self.tokenizer, _as_strings(texts, "encoder_token_ids"))
        return [row[: self.sequence_length] or [self.tokenizer.unk_id] for row in ids.to_list()]

    def generation_length(self, model):
        """`generate`'s default target length: the decoder's tokens plus `[CLS]`, within
        the model's positions."""
        return min(self.target_sequence_length + 1, model.max_sequence_length)

    def export_options(self, model):
        """The export translates as `generate` does: the target tokenizer, decoding
        stopped at its `[SEP]`, `generation_length` tokens at most."""
        from keras_attn.models import GenerationConfig

        generation = GenerationConfig(
            max_length=self.generation_length(model), end_token_id=self.target_tokenizer.sep_id
        )
        return {"target_tokenizer": self.target_tokenizer, "generation": generation}

    def call(self, x, y=None, sample_weight=None):
        self._check_ready()
        texts = _as_strings(x, "x")
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
        targets = _as_strings(y, "y")
        if single:
            targets = targets[None]
        pieces = _ragged_ids(target, targets)
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
