"""A GPT-style decoder-only causal language model, functional, with `generate()`."""

import pathlib

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers import Dropout, TransformerDecoderBlock
from keras_attn.layers.activations import gelu_approximate
from keras_attn.models import decoder_embedding as embedding
from keras_attn.models.functional_model import FunctionalModel, NextTokenCompile
from keras_attn.models.generation_mixin import GenerationMixin
from keras_attn.models.pipeline import PipelineMixin
from keras_attn.models.presets import PresetMixin


@keras_attn_export("keras_attn.models.GPTLanguageModel")
class GPTLanguageModel(
    embedding.DecoderOnlyPass,
    PipelineMixin,
    PresetMixin,
    GenerationMixin,
    NextTokenCompile,
    FunctionalModel,
):
    """Decoder-only Transformer language model (GPT): next-token logits at every position.

    Token embedding (scaled by `sqrt(hidden_dim)`, unless `scale_embeddings=False` as
    GPT-2) + positions → dropout →
    `num_layers` causal `TransformerDecoderBlock`s without cross-attention → (pre-LN:
    a final LayerNorm) → logits through the transposed token embedding ("we use
    ... the token embedding matrix" for the output, Radford et al., 2018). Batches
    are right-padded: causal attention keeps padding out of every real position,
    and the loss skips it (`compile()` ignores `pad_token_id`).

    Args:
        vocabulary_size: tokens in the vocabulary.
        num_layers: decoder blocks.
        num_heads: attention heads per block.
        hidden_dim: model width.
        intermediate_dim: feed-forward width.
        max_sequence_length: longest sequence (positions; also `generate`'s limit).
        dropout: dropout on embeddings, attention probabilities and sub-layer outputs.
        norm_first: pre-LN blocks and a final LayerNorm (GPT-2; default) or post-LN (GPT).
        score: scoring function of every attention layer.
        position_embedding: `"learned"` (GPT), `"sinusoidal"` or `"rotary"` (RoPE
            in every self-attention, base wavelength 10000, as Llama).
        activation: feed-forward activation (GPT: `"gelu"`).
        layer_norm_epsilon: epsilon of every LayerNorm.
        pad_token_id: id of padding.
        scale_embeddings: multiply the token embedding by `sqrt(hidden_dim)`
            (Vaswani et al.; default) or not (GPT-2, whose embeddings are initialised
            N(0, 0.02) instead).
        num_key_value_heads: key/value heads per block (grouped-query attention,
            Llama 2/3, Mistral; 1: multi-query); divides `num_heads`. `None`
            (default): `num_heads`. The decoding cache holds this many heads.
        dtype: dtype policy of every layer.
        preprocessor: a `CausalLMPreprocessor` (`from_preset` attaches one): `fit`,
            `evaluate` and `predict` then take strings, and `generate` continues them;
            `None`: token ids only.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: `token_ids` `(batch, length)` int, right-padded with `pad_token_id`.

    Returns:
        `(batch, length, vocabulary_size)` float32 logits; position `t` predicts token `t + 1`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import GPTLanguageModel
    >>> model = GPTLanguageModel(100, num_layers=2, num_heads=2, hidden_dim=32,
    ...                          intermediate_dim=64, max_sequence_length=16)
    >>> tuple(model(np.array([[5, 6, 7]])).shape)
    (1, 3, 100)
    >>> model.generate([[5, 6]], max_length=8, strategy="greedy").shape
    (1, 8)

    References:
        - [Radford et al., 2018](https://openai.com/research/language-unsupervised)
        - [Radford et al., 2019](https://openai.com/research/better-language-models)
    """

    preprocessor_cls = "CausalLMPreprocessor"  # `isinstance(model, CausalLM)`

    # Named sizes (`from_size`): a tiny one and GPT-2's four (Radford et al., 2019):
    # pre-LN, unscaled token embedding, tanh GELU, 1,024 positions, 50,257 tokens.
    SIZES = {
        name: dict(
            vocabulary_size=50257,
            num_layers=layers,
            hidden_dim=hidden,
            num_heads=heads,
            intermediate_dim=4 * hidden,
            max_sequence_length=1024,
            norm_first=True,
            scale_embeddings=False,
            activation=gelu_approximate,
        )
        for name, (layers, hidden, heads) in {
            "tiny": (2, 128, 2),
            "small": (12, 768, 12),
            "medium": (24, 1024, 16),
            "large": (36, 1280, 20),
            "xl": (48, 1600, 25),
        }.items()
    }

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        max_sequence_length=1024,
        dropout=0.1,
        norm_first=True,
        score="scaled_dot",
        position_embedding="learned",
        activation="gelu",
        layer_norm_epsilon=1e-5,
        pad_token_id=0,
        scale_embeddings=True,
        num_key_value_heads=None,
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
        embedding.check_position_embedding(position_embedding, embedding.GPT_POSITION_EMBEDDINGS)
        rotary = embedding.ROTARY_MAX_WAVELENGTH if position_embedding == "rotary" else None

        # === Layers ===
        self.token_embedding = embedding.token_embedding(
            vocabulary_size,
            hidden_dim,
            True,
            dtype,
            "token_embedding",
            stddev=None if scale_embeddings else 0.02,
        )
        self.scale_embeddings = bool(scale_embeddings)
        self.position_embedding = embedding.position_embedding(
            position_embedding, max_sequence_length, dtype, "position_embedding"
        )
        self.embeddings_dropout = Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.transformer_layers = [
            TransformerDecoderBlock(
                num_heads,
                intermediate_dim,
                dropout=dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                norm_first=norm_first,
                score=score,
                num_key_value_heads=num_key_value_heads,
                rotary_max_wavelength=rotary,
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.final_layer_norm = None
        if norm_first:
            self.final_layer_norm = keras.layers.LayerNormalization(
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
        self.dropout = dropout
        self.norm_first = norm_first
        self.score = self.transformer_layers[0].score
        self.position_embedding_type = position_embedding
        self.activation = keras.activations.serialize(keras.activations.get(activation))
        self.layer_norm_epsilon = layer_norm_epsilon
        self.pad_token_id = pad_token_id
        self.preprocessor = preprocessor

    # --- training and generation ---

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Loads a Hugging Face GPT-2 folder (`config.json`, `model.safetensors` or
        `pytorch_model.bin`): GPT2Model's or GPT2LMHeadModel's weights.

        GPT-2 is this model with `norm_first=True`, learned positions,
        `scale_embeddings=False` and the tanh GELU (`gelu_new`); its fused
        query/key/value projection is split into ours. There is no padding token:
        `pad_token_id` is the configuration's, else its end token (as `transformers`
        users pad; so `compile()`'s loss skips `<|endoftext|>`), else 0. The vocabulary:
        `keras_attn.data.gpt2_tokenizer(path)`. Every weight must be found (a missing
        one or a shape that does not fit raises a `ValueError` naming it); unused
        checkpoint variables are listed in a warning.

        Args:
            path: the checkpoint folder.
            **kwargs: constructor arguments to override (`dropout`, `dtype`).

        Returns:
            A `GPTLanguageModel` holding the checkpoint's weights.
        """
        from keras_attn.models.gpt import gpt2_checkpoint

        return gpt2_checkpoint.load_model(cls, path, **kwargs)

    @classmethod
    def pretrained_config(cls, path):
        """The constructor arguments of a GPT-2 folder's `config.json`."""
        from keras_attn.checkpoints import read_json
        from keras_attn.models.gpt import gpt2_checkpoint

        return gpt2_checkpoint.model_kwargs(read_json(pathlib.Path(path) / "config.json"))

    def save_pretrained(self, path, tokenizer=None):
        """Writes the Hugging Face GPT-2 layout that `transformers.AutoModel` (and
        `AutoModelForCausalLM`) loads: `config.json` and `model.safetensors`, and with
        a byte-pair `tokenizer` (keras-hub's `GPT2Tokenizer`) `vocab.json`,
        `merges.txt` and `tokenizer_config.json`. The inverse of `from_pretrained`.

        Args:
            path: the folder to write (created if needed).
            tokenizer: a keras-hub byte-pair tokenizer whose files to write too.

        Returns:
            The folder.

        Raises:
            ValueError: for what GPT-2 cannot hold, named: post-LN blocks, another
                `score`, sinusoidal positions, `scale_embeddings=True`.

        Example:

        >>> import tempfile
        >>> from keras_attn.models import GPTLanguageModel
        >>> model = GPTLanguageModel(100, num_layers=2, num_heads=2, hidden_dim=32,
        ...     intermediate_dim=64, max_sequence_length=16, scale_embeddings=False)
        >>> folder = model.save_pretrained(tempfile.mkdtemp())
        >>> sorted(p.name for p in folder.iterdir())
        ['config.json', 'model.safetensors']
        >>> GPTLanguageModel.from_pretrained(folder).num_layers
        2
        """
        from keras_attn.models.gpt import gpt2_checkpoint

        return gpt2_checkpoint.save_model(self, path, tokenizer)

    def get_config(self):
        return {
            **self._base_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "max_sequence_length": self.max_sequence_length,
            "dropout": self.dropout,
            "norm_first": self.norm_first,
            "score": self.score,
            "position_embedding": self.position_embedding_type,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "pad_token_id": self.pad_token_id,
            "scale_embeddings": self.scale_embeddings,
            "num_key_value_heads": self.num_key_value_heads,
            **self.preprocessor_config(),
        }

    @classmethod
    def from_config(cls, config):
        return super().from_config(cls.with_preprocessor(config))
