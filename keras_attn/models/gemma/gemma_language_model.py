"""Gemma 3's text decoder: scaled embeddings, QK-norm, norms around each sub-layer,
GeGLU, and local (sliding-window) and global layers with RoPE bases of their own."""

import pathlib

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_key_value_heads, check_positive_int
from keras_attn.layers import Dropout, TransformerDecoderBlock
from keras_attn.layers.activations import gelu_approximate
from keras_attn.models import decoder_embedding as embedding
from keras_attn.models.functional_model import FunctionalModel, NextTokenCompile
from keras_attn.models.generation_mixin import GenerationMixin
from keras_attn.models.llama import RMSNormDecoder
from keras_attn.models.pipeline import PipelineMixin
from keras_attn.models.presets import PresetMixin


@keras_attn_export("keras_attn.models.GemmaLanguageModel")
class GemmaLanguageModel(
    RMSNormDecoder, PipelineMixin, PresetMixin, GenerationMixin, NextTokenCompile, FunctionalModel
):
    """Gemma 3's causal language model (its text part: 270M, 1B, ...).

    Token embedding times `sqrt(hidden_dim)` → `num_layers` pre-norm
    `TransformerDecoderBlock`s whose sub-layers' outputs are RMS-normalised again
    before each residual sum (`post_norms`), with QK-norm, grouped-query attention and
    the GeGLU feed-forward net `W_down(gelu_tanh(x W_gate) * x W_up)`; every
    `global_every`-th layer attends globally with RoPE base `rope_max_wavelength`, the
    others within a sliding `window` with base `local_rope_max_wavelength` (Gemma 3's
    5:1 pattern, Gemma Team, 2025) → a final RMSNorm → logits through the token
    embedding. Gemma's RMSNorm multiplies by `1 + w`; ours holds `1 + w` as its scale.

    Args:
        vocabulary_size: tokens in the vocabulary.
        num_layers: decoder blocks.
        num_heads: query heads per block.
        hidden_dim: model width.
        intermediate_dim: the gated feed-forward net's inner width.
        head_dim: width of each head (Gemma 3: 256, not `hidden_dim // num_heads`).
        num_key_value_heads: key/value heads (divides `num_heads`; `None`: `num_heads`).
        max_sequence_length: longest sequence (`generate`'s limit).
        window: the local layers' sliding window, positions before the current one
            (Hugging Face's `sliding_window` `S` is `S - 1` here).
        global_every: layer `i` is global where `(i + 1) % global_every == 0` (6:
            five local layers, then one global).
        rope_max_wavelength: the global layers' RoPE base (Gemma 3: 1,000,000).
        local_rope_max_wavelength: the local layers' RoPE base (10,000).
        rope_scaling_factor: the global layers' linear RoPE scaling (4B and up: 8).
        layer_norm_epsilon: epsilon of every RMSNorm.
        activation: the gate's activation (tanh GELU: GeGLU).
        dropout: dropout on attention probabilities and sub-layer outputs.
        pad_token_id: id of padding.
        dtype: dtype policy of every layer.
        preprocessor: a `CausalLMPreprocessor`, or `None`: token ids only.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: `token_ids` `(batch, length)` int, right-padded with `pad_token_id`.

    Returns:
        `(batch, length, vocabulary_size)` float32 logits; position `t` predicts token `t + 1`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import GemmaLanguageModel
    >>> model = GemmaLanguageModel(100, num_layers=3, num_heads=2, hidden_dim=32,
    ...     intermediate_dim=64, head_dim=16, num_key_value_heads=1, window=4,
    ...     global_every=3)
    >>> [block.window for block in model.transformer_layers]
    [4, 4, None]
    >>> tuple(model(np.array([[5, 6, 7]])).shape)
    (1, 3, 100)

    References:
        - [Gemma Team, 2025](https://arxiv.org/abs/2503.19786)
        - [Shazeer, 2020](https://arxiv.org/abs/2002.05202)
    """

    preprocessor_cls = "CausalLMPreprocessor"
    scale_embeddings = True

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        head_dim=256,
        num_key_value_heads=None,
        max_sequence_length=32768,
        window=511,
        global_every=6,
        rope_max_wavelength=1_000_000.0,
        local_rope_max_wavelength=10_000.0,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-6,
        activation=gelu_approximate,
        dropout=0.0,
        pad_token_id=0,
        dtype=None,
        preprocessor=None,
        kernel_formats=None,
        **kwargs,
    ):
        check_positive_int("num_heads", num_heads)
        check_positive_int("head_dim", head_dim)
        check_positive_int("global_every", global_every)
        check_positive_int("window", window, allow_none=True)
        check_key_value_heads(num_key_value_heads, num_heads)
        self.check_sizes(
            hidden_dim,
            1,
            dropout,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            intermediate_dim=intermediate_dim,
            max_sequence_length=max_sequence_length,
        )

        # === Layers ===
        kernel_formats = embedding.check_model_kernel_formats(kernel_formats, num_layers, True)
        self.token_embedding = embedding.token_embedding_or_blocks(
            kernel_formats, vocabulary_size, hidden_dim, True, dtype, 0.02
        )
        self.embeddings_dropout = Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.transformer_layers = []
        for i in range(num_layers):
            is_global = (i + 1) % global_every == 0
            self.transformer_layers.append(
                TransformerDecoderBlock(
                    num_heads,
                    intermediate_dim,
                    dropout=dropout,
                    activation=activation,
                    layer_norm_epsilon=layer_norm_epsilon,
                    norm_first=True,
                    key_dim=head_dim,
                    window=None if is_global else window,
                    num_key_value_heads=num_key_value_heads,
                    rotary_max_wavelength=(
                        rope_max_wavelength if is_global else local_rope_max_wavelength
                    ),
                    rotary_scaling_factor=rope_scaling_factor if is_global else 1.0,
                    normalization="rms_norm",
                    gated_feedforward=True,
                    use_bias=False,
                    qk_norm=True,
                    post_norms=True,
                    kernel_formats=kernel_formats.get(f"transformer_layer_{i}"),
                    dtype=dtype,
                    name=f"transformer_layer_{i}",
                )
            )
        self.final_layer_norm = keras.layers.RMSNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="final_layer_norm"
        )

        # === Functional model ===
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        self.max_sequence_length = max_sequence_length
        logits = self._logits(self._call_decoder(token_ids, None))
        super().__init__(inputs=token_ids, outputs=logits, dtype=dtype, **kwargs)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.num_key_value_heads = num_key_value_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.head_dim = head_dim
        self.window = window
        self.global_every = global_every
        self.rope_max_wavelength = float(rope_max_wavelength)
        self.local_rope_max_wavelength = float(local_rope_max_wavelength)
        self.rope_scaling_factor = float(rope_scaling_factor)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.activation = keras.activations.serialize(keras.activations.get(activation))
        self.dropout = dropout
        self.pad_token_id = pad_token_id
        self.kernel_formats = kernel_formats
        self.preprocessor = preprocessor

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Loads a Hugging Face Gemma 3 text folder (`Gemma3ForCausalLM`, model_type
        `gemma3_text`) or a `.gguf` file of architecture `gemma3` (`from_gguf`).

        Args:
            path: the checkpoint folder, or a `.gguf` file.
            **kwargs: constructor arguments to override (`dropout`, `dtype`).

        Returns:
            A `GemmaLanguageModel` holding the checkpoint's weights.
        """
        if pathlib.Path(path).suffix == ".gguf":
            return cls._from_gguf_file(path, **kwargs)
        from keras_attn.models.gemma import gemma_checkpoint

        return gemma_checkpoint.load_model(cls, path, **kwargs)

    def save_pretrained(self, path, tokenizer=None):
        """Writes the Hugging Face Gemma 3 text layout (`Gemma3ForCausalLM`) that
        `transformers.AutoModelForCausalLM` loads: the inverse of `from_pretrained`.

        Args:
            path: the folder to write (created if needed).
            tokenizer: unused for now.

        Returns:
            The folder.
        """
        from keras_attn.models.gemma import gemma_checkpoint

        return gemma_checkpoint.save_model(self, path)

    def get_config(self):
        return {
            **self._base_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "head_dim": self.head_dim,
            "num_key_value_heads": self.num_key_value_heads,
            "max_sequence_length": self.max_sequence_length,
            "window": self.window,
            "global_every": self.global_every,
            "rope_max_wavelength": self.rope_max_wavelength,
            "local_rope_max_wavelength": self.local_rope_max_wavelength,
            "rope_scaling_factor": self.rope_scaling_factor,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "activation": self.activation,
            "dropout": self.dropout,
            "pad_token_id": self.pad_token_id,
            "kernel_formats": self.kernel_formats or None,
            **self.preprocessor_config(),
        }

    @classmethod
    def from_config(cls, config):
        return super().from_config(cls.with_preprocessor(config))
