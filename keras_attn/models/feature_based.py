"""Feature-based use of a frozen encoder (BERT §5.3, ELMo): a mix of its layers, a BiLSTM."""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_rate
from keras_attn.layers import Dropout, MeanPooling, ScalarMix
from keras_attn.models.functional_model import FunctionalModel
from keras_attn.models.task import Task

# How the frozen encoder's hidden states become features (BERT §5.3, Table 7; ELMo).
FEATURES = ("last", "second-to-last", "sum-last-4", "concat-last-4", "scalar-mix")
INPUTS = ("token_ids", "segment_ids", "padding_mask")


class _InferenceMode(keras.layers.Layer):
    """Runs `reader` in inference mode whatever the enclosing call's `training`: a
    functional model passes its own `training` to every layer that takes one, over
    what the graph was built with; this layer takes none."""

    def __init__(self, reader, **kwargs):
        super().__init__(**kwargs)
        self.reader = reader

    def call(self, inputs):
        return self.reader(inputs, training=False)

    def compute_output_spec(self, inputs):
        return self.reader.compute_output_spec(inputs)


def _mix(features, states):
    """The features `features` names, from the `L + 1` hidden states (embeddings first)."""
    if features in ("sum-last-4", "concat-last-4") and len(states) < 5:
        raise ValueError(
            f"Expected an encoder of 4 or more layers for features={features!r}. "
            f"Received: {len(states) - 1} layers"
        )
    if features == "last":
        return states[-1]
    if features == "second-to-last":
        return states[-2]
    if features == "sum-last-4":
        return keras.layers.Add(name="sum_last_4")(states[-4:])
    if features == "concat-last-4":
        return keras.layers.Concatenate(name="concat_last_4")(states[-4:])
    return ScalarMix(name="scalar_mix")(states)


class FeatureBasedTask(Task):
    """What the feature-based heads share: the frozen encoder, its features, the BiLSTM."""

    backbone_cls = FunctionalModel

    def _check(self, backbone, num_classes, features, lstm_units, lstm_layers, dropout):
        self.check_backbone(backbone)
        takes = set(backbone.input) if isinstance(backbone.input, dict) else set()
        if not {"token_ids", "padding_mask"} <= takes <= set(INPUTS):
            raise TypeError(
                f"Expected an encoder taking {INPUTS} (segment_ids optional). "
                f"Received: a {type(backbone).__name__}"
            )
        self.check_at_least_two("num_classes", num_classes)
        if features not in FEATURES:
            raise ValueError(f"Expected `features` in {FEATURES}. Received: {features!r}")
        check_positive_int("lstm_units", lstm_units)
        check_positive_int("lstm_layers", lstm_layers)
        check_rate("dropout", dropout)

    def _sequence(self, backbone, features, lstm_units, lstm_layers, dropout, final=False):
        """`(inputs, BiLSTM outputs)` over the features: `(batch, length, 2 * lstm_units)`,
        or with `final` the last BiLSTM's final states `(batch, 2 * lstm_units)` (forward
        after the last real token, backward after the first)."""
        inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in INPUTS}
        read = {name: inputs[name] for name in backbone.input}  # ELMo takes no segments
        states = _InferenceMode(backbone.hidden_states_model(), name="frozen_encoder")(read)
        x = Dropout(dropout, name="features_dropout")(_mix(features, states))
        mask = keras.ops.cast(inputs["padding_mask"], "bool")
        for i in range(lstm_layers):
            last = i == lstm_layers - 1
            lstm = keras.layers.LSTM(lstm_units, return_sequences=not (final and last))
            x = keras.layers.Bidirectional(lstm, name=f"bilstm_{i}")(x, mask=mask)
        return inputs, Dropout(dropout, name="output_dropout")(x)

    def _config(self, num_classes, features, lstm_units, lstm_layers, dropout):
        # The features are read, never trained: after `Model.__init__`, whose `trainable`
        # argument (a config's `True`) would set every sub-layer's.
        self.backbone.trainable = False
        self.num_classes = num_classes
        self.features = features
        self.lstm_units = lstm_units
        self.lstm_layers = lstm_layers
        self.dropout = dropout

    def get_config(self):
        return {
            **super().get_config(),
            "num_classes": self.num_classes,
            "features": self.features,
            "lstm_units": self.lstm_units,
            "lstm_layers": self.lstm_layers,
            "dropout": self.dropout,
        }


@keras_attn_export("keras_attn.models.FeatureBasedTagger")
class FeatureBasedTagger(FeatureBasedTask):
    """Token tagging from a frozen encoder's features (BERT's feature-based NER).

    "We use the representation of the first sub-token as the input to the token-level
    classifier" with "activations from one or more layers without fine-tuning any
    parameters of BERT. These contextual embeddings are used as input to a randomly
    initialized two-layer 768-dimensional BiLSTM before the classification layer"
    (Devlin et al., 2018, §5.3). `features` picks the layers (Table 7): `"last"`,
    `"second-to-last"`, `"sum-last-4"`, `"concat-last-4"` or `"scalar-mix"` (ELMo's
    learned softmax-weighted sum of every layer, `ScalarMix`). The encoder is frozen
    (`trainable=False`) and read in inference mode; only the mix, the BiLSTM and the
    classification layer learn. Labels and `sample_weight` as `BertTokenClassifier`'s
    (`keras_attn.data.tagging_inputs`).

    Args:
        backbone: an encoder taking `token_ids`, `padding_mask` and `segment_ids` (BERT,
            RoBERTa, DeBERTa-v3, XLNet) or the first two (`ElmoBiLM`): frozen here.
        num_classes: tags (>= 2).
        features: see above (default `"concat-last-4"`, the paper's best).
        lstm_units: each direction's width (BERT: 768).
        lstm_layers: stacked BiLSTMs (BERT: 2).
        dropout: on the features and on the BiLSTM's output.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask` `(batch, length)`.

    Returns:
        Logits `(batch, length, num_classes)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone, FeatureBasedTagger
    >>> backbone = BertBackbone(500, num_layers=4, num_heads=2, hidden_dim=32,
    ...                         intermediate_dim=64)
    >>> tagger = FeatureBasedTagger(backbone, num_classes=5, lstm_units=8)
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> tuple(tagger(x).shape), backbone.trainable
    ((1, 4, 5), False)

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805), section 5.3
        - [Peters et al., 2018, ELMo](https://arxiv.org/abs/1802.05365)
    """

    def __init__(
        self,
        backbone,
        num_classes,
        features="concat-last-4",
        lstm_units=768,
        lstm_layers=2,
        dropout=0.1,
        **kwargs,
    ):
        self._check(backbone, num_classes, features, lstm_units, lstm_layers, dropout)
        self.backbone = backbone
        inputs, x = self._sequence(backbone, features, lstm_units, lstm_layers, dropout)
        logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self._config(num_classes, features, lstm_units, lstm_layers, dropout)

    def compile(self, optimizer="adam", loss=None, metrics=None, weighted_metrics=None, **kwargs):
        """Defaults: sparse cross-entropy on logits, accuracy weighted by `sample_weight`."""
        self.compile_classification(
            optimizer, loss, metrics, weighted_metrics, weighted=True, **kwargs
        )


@keras_attn_export("keras_attn.models.FeatureBasedClassifier")
class FeatureBasedClassifier(FeatureBasedTask):
    """Text classification from a frozen encoder's features through a BiLSTM.

    The feature-based counterpart of `BertClassifier`: the frozen encoder's layers mixed
    as `features` says (see `FeatureBasedTagger`), a BiLSTM over the sequence, then its
    final states (`pooling="final"`: the forward LSTM's after the last real token, the
    backward one's after the first) or its outputs' mean over the real tokens
    (`"mean"`), and a classification layer.

    Args:
        backbone: an encoder taking `token_ids`, `segment_ids`, `padding_mask`: frozen.
        num_classes: classes (>= 2).
        features: which layers, and how mixed (`FeatureBasedTagger`).
        lstm_units: each direction's width.
        lstm_layers: stacked BiLSTMs.
        dropout: on the features and on the BiLSTM's output.
        pooling: `"final"` or `"mean"`.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask` `(batch, length)`.

    Returns:
        Logits `(batch, num_classes)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone, FeatureBasedClassifier
    >>> backbone = BertBackbone.from_size("tiny", vocabulary_size=500)
    >>> model = FeatureBasedClassifier(backbone, 2, features="scalar-mix", lstm_units=8)
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> tuple(model(x).shape)
    (1, 2)
    """

    def __init__(
        self,
        backbone,
        num_classes,
        features="scalar-mix",
        lstm_units=256,
        lstm_layers=1,
        dropout=0.1,
        pooling="final",
        **kwargs,
    ):
        self._check(backbone, num_classes, features, lstm_units, lstm_layers, dropout)
        if pooling not in ("final", "mean"):
            raise ValueError(f"Expected `pooling` in ('final', 'mean'). Received: {pooling!r}")
        self.backbone = backbone
        inputs, pooled = self._sequence(
            backbone, features, lstm_units, lstm_layers, dropout, final=pooling == "final"
        )
        if pooling == "mean":
            pooled = MeanPooling(name="mean_pooling")(pooled, padding_mask=inputs["padding_mask"])
        logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(pooled)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self._config(num_classes, features, lstm_units, lstm_layers, dropout)
        self.pooling = pooling

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Defaults: sparse cross-entropy on logits and accuracy."""
        self.compile_classification(optimizer, loss, metrics, **kwargs)

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling}
