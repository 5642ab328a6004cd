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

import pathlib

import keras
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
            config = {
                "sequence_length": int(tokenizer.sequence_length),
                "lowercase": bool(getattr(tokenizer, "lowercase", True)),
                "strip_accents": getattr(tokenizer, "strip_accents", None),
            }
        self._tokenizer_config = {
            "sequence_length": config.get("sequence_length", 128),
            "lowercase": config.get("lowercase", True),
            "strip_accents": config.get("strip_accents"),
        }
        # A preprocessing layer: strings pass as they are; nothing to build.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    @property
    def sequence_length(self):
        """The packed length of every row (the tokenizer's)."""
        return self._tokenizer_config["sequence_length"]

    def _files(self):
        from keras_attn.models import registry

        return registry.family(self.family).tokenizer

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
