"""The base of the preprocessors (`keras_attn.models.preprocessors`): a tokenizer, its
family's files as the layer's assets, and the rules of a preprocessing layer."""

import pathlib

import keras
import tensorflow as tf

from keras_attn.api_export import keras_attn_export


def as_strings(value, name):
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
        segments = [as_strings(s, "x") for s in segments]
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


def ragged_ids(tokenizer, text):
    """`tokenizer.tokenize(text)` as a RaggedTensor of int32 `(batch, (pieces))`, for our
    tokenizers and keras-hub's (whose eager results are Python lists)."""
    ids = tokenizer.tokenize(text)
    if isinstance(ids, tf.RaggedTensor):
        return tf.cast(ids, tf.int32)
    if isinstance(ids, tf.Tensor):
        return tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int32))
    return tf.ragged.constant(ids, tf.int32, ragged_rank=1, inner_shape=())
