"""DeBERTa's masked-LM pre-training model, with the enhanced mask decoder."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.models.deberta.deberta_backbone import DebertaV3Backbone
from keras_attn.models.deberta.deberta_layers import initializer
from keras_attn.models.masked_lm_head import MaskedLMHead
from keras_attn.models.task import Task

# The enhanced mask decoder's passes through the last layer (He et al.: "n = 2").
DECODER_STEPS = 2


@keras_attn_export("keras_attn.models.DebertaV3MaskedLM")
class DebertaV3MaskedLM(Task):
    """A `DebertaV3Backbone` with DeBERTa's masked-LM head and enhanced mask decoder.

    DeBERTa's attention sees only relative positions, so "the absolute positions are
    incorporated right after all the Transformer layers but before the softmax layer
    for masked token prediction" (He et al., 2021, section 3.3): the enhanced mask
    decoder (EMD) runs the backbone's last layer twice more, its queries the last
    layer's input plus absolute position embeddings (then the previous pass's
    output), its keys and values the last layer's input, as Microsoft's
    `EnhancedMaskDecoder` does; the masked-LM head (dense, GELU, LayerNorm, the
    transposed token embedding plus a bias) reads the second pass at the
    `masked_positions`. A backbone with absolute positions in its input (DeBERTa-v2
    settings) has the plain head on its output, as Microsoft's code; so does
    `enhanced_mask_decoder=False`. `compile()` without arguments sets the
    masked-LM loss (weighted by the masked weights) and `mlm_logits_accuracy`.

    Args:
        backbone: a `DebertaV3Backbone`.
        enhanced_mask_decoder: `None` (default: the EMD unless the backbone's input
            has absolute positions), `True` or `False`.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask`
            `(batch, length)` and `masked_positions` `(batch, predictions)`.

    Returns:
        A dict: `mlm_logits` `(batch, predictions, vocabulary_size)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import DebertaV3Backbone, DebertaV3MaskedLM
    >>> model = DebertaV3MaskedLM(DebertaV3Backbone.from_size("tiny", vocabulary_size=100))
    >>> x = {"token_ids": np.array([[1, 7, 4, 2]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32"), "masked_positions": np.array([[2]])}
    >>> model.enhanced_mask_decoder, tuple(model(x)["mlm_logits"].shape)
    (True, (1, 1, 100))

    References:
        - [He et al., 2021, DeBERTa](https://arxiv.org/abs/2006.03654), section 3.3
    """

    backbone_cls = DebertaV3Backbone
    preprocessor_cls = "MaskedLMPreprocessor"

    def __init__(self, backbone, enhanced_mask_decoder=None, **kwargs):
        self.check_backbone(backbone)
        if enhanced_mask_decoder is None:
            enhanced_mask_decoder = not backbone.position_biased_input
        if enhanced_mask_decoder not in (True, False):
            raise TypeError(
                "Expected `enhanced_mask_decoder` None, True or False. Received: "
                f"enhanced_mask_decoder={enhanced_mask_decoder!r}"
            )
        if enhanced_mask_decoder and backbone.position_biased_input:
            raise ValueError(
                "Expected `enhanced_mask_decoder=False` (or None) with a backbone whose input "
                "has absolute positions (position_biased_input=True): the decoder adds them "
                "only where the input lacks them."
            )

        # === Layers ===
        self.backbone = backbone
        self.decoder_positions = None
        if enhanced_mask_decoder:
            self.decoder_positions = keras.layers.Embedding(
                backbone.max_sequence_length,
                backbone.hidden_dim,
                embeddings_initializer=initializer(backbone.initializer_range),
                dtype=backbone.dtype_policy,
                name="decoder_position_embedding",
            )
        self.masked_lm_head = MaskedLMHead(
            backbone.token_embedding,
            activation=backbone.activation,
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            kernel_initializer=initializer(backbone.initializer_range),
            dtype=backbone.dtype_policy,
            name="mlm_logits",
        )

        # === Functional model ===
        inputs = dict(backbone.input)
        inputs["masked_positions"] = keras.Input((None,), dtype="int32", name="masked_positions")
        padding_mask = inputs["padding_mask"]
        if enhanced_mask_decoder:
            x = backbone._embed(inputs["token_ids"], inputs["segment_ids"], padding_mask)
            table = backbone.relative_positions(x)
            *lower, last = backbone.transformer_layers
            for transformer_layer in lower:
                x = transformer_layer(x, table, padding_mask=padding_mask)
            positions = ops.cumsum(ops.ones_like(inputs["token_ids"]), axis=1) - 1
            query = x + self.decoder_positions(positions)
            for _ in range(DECODER_STEPS):  # the same last layer, its keys and values x
                query = last(query, table, value=x, padding_mask=padding_mask)
            sequence = query
        else:
            sequence = backbone({k: inputs[k] for k in backbone.input})["sequence_output"]
        outputs = {"mlm_logits": self.masked_lm_head(sequence, inputs["masked_positions"])}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.enhanced_mask_decoder = enhanced_mask_decoder

    def compile(self, optimizer="adam", loss=None, metrics=None, weighted_metrics=None, **kwargs):
        """Defaults: the masked-LM sparse cross-entropy and `mlm_logits_accuracy`."""
        loss = loss or {"mlm_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}
        if weighted_metrics is None:  # one output: the name keeps Keras's "mlm_logits_"
            accuracy = keras.metrics.SparseCategoricalAccuracy(name="mlm_logits_accuracy")
            weighted_metrics = {"mlm_logits": [accuracy]}
        super().compile(
            optimizer=optimizer,
            loss=loss,
            metrics=metrics,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )

    def get_config(self):
        config = super().get_config()
        config.update({"enhanced_mask_decoder": self.enhanced_mask_decoder})
        return config
