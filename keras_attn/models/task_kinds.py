"""keras-hub's generic task classes: `TextClassifier.from_preset(preset, num_classes=N)`
builds the classifier of whichever family the preset holds (the registry's head for the
task), its preprocessor attached, so code written against keras-hub's generic names
needs only its import changed. `isinstance(model, TextClassifier)` holds for every
family's classifier."""

from keras_attn.api_export import keras_attn_export


class _TaskKind(type):
    """`isinstance(model, Kind)`: the model's class takes the kind's preprocessor; a
    kind is never built itself (`Kind()` names `from_preset` and the family classes)."""

    def __instancecheck__(cls, instance):
        return getattr(type(instance), "preprocessor_cls", None) == cls.preprocessor_cls

    def __subclasscheck__(cls, subclass):
        return getattr(subclass, "preprocessor_cls", None) == cls.preprocessor_cls

    def __call__(cls, *args, **kwargs):
        raise TypeError(
            f"{cls.__name__} is built from a preset: {cls.__name__}.from_preset"
            f"({cls.preset_arguments}), or use a family's class ({cls.family_classes})"
        )


@keras_attn_export("keras_attn.models.TextClassifier", serializable=False)
class TextClassifier(metaclass=_TaskKind):
    """The text classifier of a preset's family, as keras-hub's `TextClassifier`.

    Not a model class of its own: `from_preset` returns the family's classifier
    (`BertClassifier` for BERT, ALBERT, ELECTRA, DistilBERT and RoBERTa;
    `DebertaV3Classifier`, `XLNetClassifier`, GPT-1's `GPTFineTuner`), and every one of
    those is an instance of `TextClassifier`.

    Args:
        None: not constructed; see `from_preset`'s.

    Call arguments:
        None: the model `from_preset` returns takes the family classifier's inputs
            (and, through its preprocessor, strings in `fit`, `evaluate`, `predict`).

    Example:

    >>> from keras_attn.models import BertClassifier, TextClassifier
    >>> issubclass(BertClassifier, TextClassifier)
    True
    """

    task = "classification"
    preprocessor_cls = "TextClassifierPreprocessor"
    preset_arguments = "preset, num_classes=..."
    family_classes = "BertClassifier, DebertaV3Classifier, ..."

    @classmethod
    def from_preset(
        cls,
        preset,
        num_classes=None,
        load_weights=True,
        sequence_length=None,
        lowercase=None,
        dropout=0.1,
        pooling=None,
        **options,
    ):
        """The preset family's classifier on its backbone, with its preprocessor,
        compiled for fine-tuning (Adam at 5e-5, keras-hub's; `compile()` to choose).

        Args:
            preset: a registered preset or a folder (`keras_attn.models.presets`).
            num_classes: the labels (>= 2); `None`: a keras-hub classifier preset's.
            load_weights: `False`: the preset's configuration randomly initialised.
            sequence_length: the preprocessor's packed length (`None`: a keras-hub
                preset's preprocessor's, else 128).
            lowercase: lower-case a WordPiece vocabulary (`None`: as the folder says).
            dropout: dropout before the classification layer.
            pooling: the family's pooling (`"cls"`, `"mean"`, XLNet's `"last"`, ...);
                `None`: the family's default.
            **options: a family head's own options (GPT-1's `lm_weight`).
        """
        from keras_attn.models import registry
        from keras_attn.models.presets import load_with_tokenizer

        backbone, tokenizer, source = load_with_tokenizer(
            preset, sequence_length, lowercase, load_weights
        )
        if source is not None and num_classes is None:
            num_classes = getattr(source, "num_classes", None)
        family = registry.family_of(backbone)
        if cls.task not in family.heads:
            raise ValueError(
                f"The preset {str(preset)!r} holds a {type(backbone).__name__}, whose family "
                f"({family.name}) has no {cls.task} head"
            )
        if family.adapt is not None:  # GPT-1's start, delimiter and extract tokens
            backbone, tokenizer = family.adapt(backbone, tokenizer)
        arguments = {"dropout": dropout, **({} if pooling is None else {"pooling": pooling})}
        model = family.head(cls.task, backbone, num_classes, **arguments, **options)
        return model.took_preset(tokenizer, source)


@keras_attn_export("keras_attn.models.MaskedLM", serializable=False)
class MaskedLM(metaclass=_TaskKind):
    """The masked-LM pre-training model of a preset's family, as keras-hub's `MaskedLM`:
    `fit` on strings pre-trains it, masking each batch anew (`MaskedLMPreprocessor`).

    Not a model class of its own: `from_preset` returns `BertPretrainer` with
    `sentence_objective="none"` (BERT, ALBERT, ELECTRA, DistilBERT, RoBERTa: keras-hub's
    `BertMaskedLM`, `RobertaMaskedLM`, ...) or `DebertaV3MaskedLM`, and every model
    that takes a `MaskedLMPreprocessor` is an instance of `MaskedLM`.

    Args:
        None: not constructed; see `from_preset`'s.

    Call arguments:
        None: the model `from_preset` returns takes the family model's inputs (and,
            through its preprocessor, strings in `fit`, `evaluate`, `predict`).

    Example:

    >>> from keras_attn.models import BertPretrainer, DebertaV3MaskedLM, MaskedLM
    >>> issubclass(BertPretrainer, MaskedLM), issubclass(DebertaV3MaskedLM, MaskedLM)
    (True, True)
    """

    preprocessor_cls = "MaskedLMPreprocessor"
    preset_arguments = "preset"
    family_classes = "BertPretrainer, DebertaV3MaskedLM"

    @classmethod
    def from_preset(
        cls, preset, load_weights=True, sequence_length=None, lowercase=None, **preprocessing
    ):
        """The preset family's masked-LM model on its backbone, with its
        `MaskedLMPreprocessor`, compiled for fine-tuning (Adam at 5e-5, keras-hub's;
        `compile()` to choose).

        Args:
            preset: a registered preset or a folder (`keras_attn.models.presets`).
            load_weights: `False`: the preset's configuration randomly initialised.
            sequence_length: the packed length (`None`: a keras-hub preset's
                preprocessor's, else 128).
            lowercase: lower-case a WordPiece vocabulary (`None`: as the folder says).
            **preprocessing: `MaskedLMPreprocessor` arguments (`mask_selection_rate`,
                `mask_token_rate`, `random_token_rate`, `mask_selection_length`,
                `seed`).
        """
        from keras_attn.models import preprocessors, registry
        from keras_attn.models.presets import load_with_tokenizer

        backbone, tokenizer, _ = load_with_tokenizer(
            preset, sequence_length, lowercase, load_weights
        )
        family = registry.family_of(backbone)
        if family.masked_lm is None:
            raise ValueError(
                f"The preset {str(preset)!r} holds a {type(backbone).__name__}, whose family "
                f"({family.name}) has no masked-LM model"
            )
        model = family.masked_lm(backbone)
        model.took_preset(tokenizer)
        model.preprocessor = preprocessors.MaskedLMPreprocessor(tokenizer, **preprocessing)
        return model


# keras-hub's `CausalLM.compile` default: Adam at this rate.
CAUSAL_LM_LEARNING_RATE = 2e-5


@keras_attn_export("keras_attn.models.CausalLM", serializable=False)
class CausalLM(metaclass=_TaskKind):
    """The causal language model of a preset, as keras-hub's `CausalLM`: `fit` on
    strings trains it, `generate` continues strings (`CausalLMPreprocessor`).

    Not a model class of its own: `from_preset` returns a `GPTLanguageModel` (a
    Hugging Face GPT-2 folder with its byte-level BPE, or a `keras-attn lm` run with its
    WordPiece vocabulary) or a `TransformerXL` (a `keras-attn lm --architecture
    transformer_xl` run), and every model that takes a `CausalLMPreprocessor` is an
    instance of `CausalLM`.

    Args:
        None: not constructed; see `from_preset`'s.

    Call arguments:
        None: the model `from_preset` returns takes token ids (and, through its
            preprocessor, strings in `fit`, `evaluate`, `predict` and `generate`).

    Example:

    >>> from keras_attn.models import CausalLM, GPTLanguageModel
    >>> issubclass(GPTLanguageModel, CausalLM)
    True
    """

    preprocessor_cls = "CausalLMPreprocessor"
    preset_arguments = "preset"
    family_classes = "GPTLanguageModel, TransformerXL"

    @classmethod
    def from_preset(cls, preset, load_weights=True, sequence_length=None, **preprocessing):
        """The preset's language model with its `CausalLMPreprocessor`, compiled as
        keras-hub compiles its causal LMs (Adam at 2e-5; `compile()` to choose).

        Args:
            preset: a registered preset or a folder (`keras_attn.models.presets`): a
                Hugging Face GPT-2 folder (`vocab.json`, `merges.txt` beside the
                weights) or a `keras-attn lm` run (`model.keras`, `vocab.txt`).
            load_weights: `False`: the preset's configuration randomly initialised.
            sequence_length: the tokens of a training row, and `generate`'s default
                length (`None`: 128, or the model's positions when fewer).
            **preprocessing: `CausalLMPreprocessor` arguments (`add_start_token`,
                `add_end_token`).
        """
        import keras

        from keras_attn.models import preprocessors
        from keras_attn.models.presets import load_with_tokenizer

        model, tokenizer, source = load_with_tokenizer(preset, sequence_length, None, load_weights)
        if getattr(type(model), "preprocessor_cls", None) != cls.preprocessor_cls:
            raise ValueError(
                f"The preset {str(preset)!r} holds a {type(model).__name__}, not a causal "
                "language model (GPTLanguageModel, TransformerXL)"
            )
        hub_preprocessor = getattr(source, "preprocessor", None)  # a keras-hub causal LM's
        if hub_preprocessor is not None:
            preprocessing = {
                "add_start_token": hub_preprocessor.add_start_token,
                "add_end_token": hub_preprocessor.add_end_token,
                **preprocessing,
            }
            sequence_length = sequence_length or min(
                hub_preprocessor.sequence_length, model.max_sequence_length
            )
        model.preprocessor = preprocessors.CausalLMPreprocessor(
            tokenizer,
            sequence_length=sequence_length or _tokenizer_length(tokenizer, model),
            **preprocessing,
        )
        model.compile(optimizer=keras.optimizers.Adam(CAUSAL_LM_LEARNING_RATE))
        return model


def _tokenizer_length(tokenizer, model):
    """A preset's rows when none is asked for: the tokenizer's packed length (set by
    `load_with_tokenizer`), or 128 within the model's positions."""
    return getattr(tokenizer, "sequence_length", None) or min(
        128, getattr(model, "max_sequence_length", None) or 128
    )
