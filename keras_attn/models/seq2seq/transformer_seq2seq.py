"""The encoder-decoder Transformer of "Attention Is All You Need", functional, with `generate()`."""

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int
from keras_attn.layers import Dropout, TransformerDecoderBlock, TransformerEncoderBlock
from keras_attn.models import decoder_embedding as embedding
from keras_attn.models.functional_model import FunctionalModel, default_loss
from keras_attn.models.generation_mixin import GenerationMixin, is_text, pad_prompt
from keras_attn.models.pipeline import PipelineMixin
from keras_attn.models.presets import PresetMixin


@keras_attn_export("keras_attn.models.TransformerSeq2Seq")
class TransformerSeq2Seq(PipelineMixin, PresetMixin, GenerationMixin, FunctionalModel):
    """Encoder-decoder Transformer: source ids and shifted-right target ids → target logits.

    "The encoder maps an input sequence of symbol representations to a sequence of
    continuous representations z. Given z, the decoder then generates an output
    sequence ... one element at a time" (Vaswani et al., 2017). Embeddings are
    multiplied by `sqrt(hidden_dim)` and summed with positions (sinusoidal or
    learned), then dropout; `num_layers` encoder blocks; `num_layers` decoder blocks
    with causal self-attention and cross-attention to the encoder output (padding
    of the source masked); logits through the transposed target embedding ("we
    share the same weight matrix between the two embedding layers and the
    pre-softmax linear transformation"). The defaults are the paper's base model.

    Args:
        vocabulary_size: source vocabulary (and target too, when
            `target_vocabulary_size` is None: one embedding for both sides).
        num_layers: encoder blocks, and decoder blocks (paper: 6).
        num_heads: attention heads (paper: 8).
        hidden_dim: `d_model` (paper: 512).
        intermediate_dim: `d_ff` (paper: 2048).
        dropout: `P_drop` on embeddings, attention and sub-layer outputs (paper: 0.1).
        max_sequence_length: longest source and target (positions; `generate`'s limit).
        target_vocabulary_size: a separate target vocabulary, or None.
        tie_embeddings: the output projection is the transposed target embedding
            (otherwise a separate dense layer).
        norm_first: pre-LN blocks (plus a final LayerNorm per stack) or post-LN (paper).
        score: scoring function of every attention layer.
        position_embedding: `"sinusoidal"` (paper) or `"learned"`.
        activation: feed-forward activation (paper: ReLU).
        layer_norm_epsilon: epsilon of every LayerNorm.
        pad_token_id: id of padding on both sides.
        dtype: dtype policy of every layer.
        preprocessor: a `Seq2SeqPreprocessor` (source and target tokenizers): `fit`,
            `evaluate` and `predict` then take source texts (and target texts as `y`),
            and `generate` translates strings; `None`: token ids only.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `encoder_token_ids` `(batch, source_len)` and
            `decoder_token_ids` `(batch, target_len)`, right-padded with `pad_token_id`.

    Returns:
        `(batch, target_len, target vocabulary)` float32 logits; position `t`
        predicts target token `t + 1`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import TransformerSeq2Seq
    >>> model = TransformerSeq2Seq(50, num_layers=1, num_heads=2, hidden_dim=16,
    ...                            intermediate_dim=32, max_sequence_length=12)
    >>> logits = model({"encoder_token_ids": np.array([[5, 6, 7, 0]]),
    ...                 "decoder_token_ids": np.array([[1, 8, 9]])})
    >>> tuple(logits.shape)
    (1, 3, 50)
    >>> model.generate(np.array([[5, 6, 7, 0]]), max_length=6, start_token_id=1).shape
    (1, 6)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
    """

    preprocessor_cls = "Seq2SeqPreprocessor"

    # Named sizes (`from_size`): a tiny one and the paper's base and big models
    # (Vaswani et al., 2017, table 3), with a shared vocabulary of 37,000 tokens.
    SIZES = {
        "tiny": dict(
            vocabulary_size=37000, num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=512
        ),
        "base": dict(vocabulary_size=37000),
        "big": dict(
            vocabulary_size=37000, num_heads=16, hidden_dim=1024, intermediate_dim=4096, dropout=0.3
        ),
    }

    def __init__(
        self,
        vocabulary_size,
        num_layers=6,
        num_heads=8,
        hidden_dim=512,
        intermediate_dim=2048,
        dropout=0.1,
        max_sequence_length=256,
        target_vocabulary_size=None,
        tie_embeddings=True,
        norm_first=False,
        score="scaled_dot",
        position_embedding="sinusoidal",
        activation="relu",
        layer_norm_epsilon=1e-5,
        pad_token_id=0,
        dtype=None,
        preprocessor=None,
        **kwargs,
    ):
        self.check_sizes(
            hidden_dim,
            num_heads,
            dropout,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            intermediate_dim=intermediate_dim,
            max_sequence_length=max_sequence_length,
        )
        check_positive_int("target_vocabulary_size", target_vocabulary_size, allow_none=True)
        embedding.check_position_embedding(position_embedding)
        target_size = target_vocabulary_size or vocabulary_size

        # === Layers ===
        shared = target_vocabulary_size is None
        self.encoder_token_embedding = embedding.token_embedding(
            vocabulary_size,
            hidden_dim,
            tie_embeddings,
            dtype,
            "token_embedding" if shared else "encoder_token_embedding",
        )
        self.decoder_token_embedding = (
            self.encoder_token_embedding
            if shared
            else (
                embedding.token_embedding(
                    target_size, hidden_dim, tie_embeddings, dtype, "decoder_token_embedding"
                )
            )
        )
        self.output_dense = None
        if not tie_embeddings:
            self.output_dense = keras.layers.Dense(target_size, dtype=dtype, name="output_dense")
        self.encoder_position_embedding, self.decoder_position_embedding = (
            embedding.position_embedding(position_embedding, max_sequence_length, dtype, name)
            for name in ("encoder_position_embedding", "decoder_position_embedding")
        )
        self.encoder_embeddings_dropout, self.decoder_embeddings_dropout = (
            Dropout(dropout, dtype=dtype, name=name)
            for name in ("encoder_embeddings_dropout", "decoder_embeddings_dropout")
        )
        block_args = dict(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            dropout=dropout,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            norm_first=norm_first,
            score=score,
            dtype=dtype,
        )
        self.encoder_layers = [
            TransformerEncoderBlock(**block_args, name=f"encoder_layer_{i}")
            for i in range(num_layers)
        ]
        self.decoder_layers = [
            TransformerDecoderBlock(**block_args, name=f"decoder_layer_{i}")
            for i in range(num_layers)
        ]
        self.encoder_final_layer_norm = self.decoder_final_layer_norm = None
        if norm_first:
            self.encoder_final_layer_norm, self.decoder_final_layer_norm = (
                keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, dtype=dtype, name=name)
                for name in ("encoder_final_layer_norm", "decoder_final_layer_norm")
            )

        # === Functional model ===
        inputs = {
            "encoder_token_ids": keras.Input((None,), dtype="int32", name="encoder_token_ids"),
            "decoder_token_ids": keras.Input((None,), dtype="int32", name="decoder_token_ids"),
        }
        self.pad_token_id, self.hidden_dim, self.num_heads = pad_token_id, hidden_dim, num_heads
        context = self._encode(inputs["encoder_token_ids"])
        logits = self._logits(self._call_decoder(inputs["decoder_token_ids"], context))
        super().__init__(inputs=inputs, outputs=logits, dtype=dtype, **kwargs)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.target_vocabulary_size = target_vocabulary_size
        self.tie_embeddings = tie_embeddings
        self.norm_first = norm_first
        self.score = self.encoder_layers[0].score
        self.position_embedding_type = position_embedding
        self.activation = keras.activations.serialize(keras.activations.get(activation))
        self.layer_norm_epsilon = layer_norm_epsilon
        self.preprocessor = preprocessor

    def _hidden_state_stacks(self):  # `hidden_states`: {"encoder": [...], "decoder": [...]}
        return {
            "encoder": (self.encoder_layers, self.encoder_final_layer_norm),
            "decoder": (self.decoder_layers, self.decoder_final_layer_norm),
        }

    # --- encoder and decoder, for the functional graph and for generation ---

    def _encode(self, source_ids, training=None):
        """`(encoder_output, encoder_padding_mask)`."""
        padding_mask = ops.not_equal(source_ids, self.pad_token_id)
        x = embedding.embed(
            self.encoder_token_embedding,
            self.encoder_position_embedding,
            self.encoder_embeddings_dropout,
            source_ids,
            training=training,
        )
        for block in self.encoder_layers:
            x = block(x, padding_mask=padding_mask, training=training)
        if self.encoder_final_layer_norm is not None:
            x = self.encoder_final_layer_norm(x)
        return x, padding_mask

    def _decoding_context(self, source):
        encoder_output, padding_mask = self._encode(source)
        cross_caches = tuple(
            block.cross_attention.compute_cache(encoder_output) for block in self.decoder_layers
        )
        return encoder_output, padding_mask, cross_caches

    def _decoder_blocks(self):
        return self.decoder_layers

    def _call_decoder(
        self, token_ids, context, caches=None, index=None, training=None, cache_write="slice"
    ):
        encoder_output, encoder_padding_mask = context[:2]
        cross_caches = context[2] if len(context) > 2 else [None] * len(self.decoder_layers)
        x = embedding.embed(
            self.decoder_token_embedding,
            self.decoder_position_embedding,
            self.decoder_embeddings_dropout,
            token_ids,
            start_index=0 if index is None else index,
            training=training,
        )
        updated = []
        for i, block in enumerate(self.decoder_layers):
            arguments = dict(
                encoder_sequence=encoder_output,
                encoder_padding_mask=encoder_padding_mask,
                cross_attention_cache=cross_caches[i],
                training=training,
            )
            if caches is None:
                x = block(x, **arguments)
            else:
                x, cache = block(
                    x,
                    self_attention_cache=caches[i],
                    self_attention_cache_update_index=index,
                    cache_write=cache_write,
                    **arguments,
                )
                updated.append(cache)
        if self.decoder_final_layer_norm is not None:
            x = self.decoder_final_layer_norm(x)
        return x if caches is None else (x, tuple(updated))

    def _logits(self, hidden):
        if self.output_dense is not None:
            return ops.cast(self.output_dense(hidden), "float32")
        return self.decoder_token_embedding(hidden, reverse=True)  # float32 (reverse_dtype)

    # --- training and generation ---

    def compile(self, optimizer=None, loss=None, metrics=None, weighted_metrics=None, **kwargs):
        """Defaults: the paper's Adam (beta_2 0.98, epsilon 1e-9) and label-smoothed
        (0.1) cross-entropy that skips `pad_token_id`; token accuracy weighted by
        the data's `sample_weight`. Give an `optimizer` with `TransformerSchedule`
        for the paper's warm-up."""
        super().compile(
            optimizer=optimizer
            or keras.optimizers.Adam(1e-3, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
            loss=loss or default_loss(0.1, self.pad_token_id),
            metrics=metrics,
            weighted_metrics=weighted_metrics
            or [keras.metrics.SparseCategoricalAccuracy("accuracy")],
            **kwargs,
        )

    def generate(
        self,
        encoder_token_ids,
        max_length=None,
        start_token_id=None,
        prompt=None,
        config=None,
        *,
        use_cache=True,
        jit_compile=True,
        return_log_probs=False,
        **overrides,
    ):
        """Decodes a target for each source row, starting from `[start_token_id]`.

        Args:
            encoder_token_ids: `(batch, source_len)` ids, right-padded (or a list
                of id lists), at most `max_sequence_length` long.
            max_length: length of the returned targets (start token included),
                `<= max_sequence_length` (overrides `config.max_length`).
            start_token_id: the decoder's first token (or give `prompt`).
            prompt: target prefixes to continue instead, `(batch or 1, length)`.
            config: a `GenerationConfig` (default: greedy; the paper decodes with
                `GenerationConfig(strategy="beam", num_beams=4, length_penalty=0.6)`).
            use_cache, jit_compile, return_log_probs, **overrides: as
                `GPTLanguageModel.generate`.

        Returns:
            `(batch, max_length)` int32 numpy array (and with `return_log_probs`
            the `(batch,)` log-probabilities of the generated tokens).
        """
        if is_text(encoder_token_ids):
            return self._translate(
                encoder_token_ids,
                max_length,
                config,
                dict(use_cache=use_cache, jit_compile=jit_compile),
                return_log_probs,
                overrides,
            )
        config = self._generation_config(config, max_length, overrides)
        source, _ = pad_prompt(
            encoder_token_ids, self.pad_token_id, "encoder_token_ids", self.vocabulary_size
        )
        if source.shape[1] > self.max_sequence_length:
            raise ValueError(
                f"`encoder_token_ids` is longer ({source.shape[1]} tokens) than the model's "
                f"positions (max_sequence_length={self.max_sequence_length})."
            )
        if (prompt is None) == (start_token_id is None):
            raise ValueError(
                "Give exactly one of `start_token_id` and `prompt`. Received: "
                f"start_token_id={start_token_id!r}, prompt={'None' if prompt is None else '...'}"
            )
        if prompt is None:
            prompt = np.full((source.shape[0], 1), start_token_id, "int64")
        tokens, _, lengths = self._generate(prompt, config, source, use_cache, jit_compile)
        if not return_log_probs:
            return tokens
        log_probs = self._sequence_log_probs(tokens, lengths, source)
        return tokens, ops.convert_to_numpy(log_probs)

    def _translate(self, sources, max_length, config, options, return_log_probs, overrides):
        """`generate` on strings, through the model's `Seq2SeqPreprocessor`: each source
        text's translation as text, decoded from the target's `[CLS]` to its `[SEP]`."""
        preprocessor = self.preprocessor
        if not hasattr(preprocessor, "target_tokenizer"):
            raise ValueError(
                "Expected token ids as `encoder_token_ids`: this model has no "
                "Seq2SeqPreprocessor to read text (set `model.preprocessor = "
                "Seq2SeqPreprocessor(source_tokenizer, target_tokenizer)`). Received: strings"
            )
        single = isinstance(sources, str)
        ids = preprocessor.source_ids([sources] if single else list(sources))
        target = preprocessor.target_tokenizer
        if config is None or config.end_token_id is None:
            overrides.setdefault("end_token_id", target.sep_id)
        if max_length is None and (config is None or config.max_length is None):
            max_length = preprocessor.generation_length(self)
        tokens = self.generate(
            ids, max_length, target.cls_id, config=config,
            return_log_probs=return_log_probs, **options, **overrides,
        )  # fmt: skip
        tokens, log_probs = tokens if return_log_probs else (tokens, None)
        texts = target.detokenize(tokens)
        texts = texts[0] if single else texts
        return (texts, log_probs) if return_log_probs else texts

    def get_config(self):
        return {
            **self._base_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "max_sequence_length": self.max_sequence_length,
            "target_vocabulary_size": self.target_vocabulary_size,
            "tie_embeddings": self.tie_embeddings,
            "norm_first": self.norm_first,
            "score": self.score,
            "position_embedding": self.position_embedding_type,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "pad_token_id": self.pad_token_id,
            **self.preprocessor_config(),
        }

    @classmethod
    def from_config(cls, config):
        return super().from_config(cls.with_preprocessor(config))
