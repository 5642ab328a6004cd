"""XLNet's encoder: Transformer-XL layers with two-stream attention, as a functional model."""

import pathlib

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_positive_number
from keras_attn.layers import Dropout, TransformerXLBlock
from keras_attn.layers.cache_writes import next_memory
from keras_attn.models.functional_model import FunctionalModel
from keras_attn.models.presets import PresetMixin

INPUTS = ("token_ids", "segment_ids", "padding_mask")


class XLNetMasks(keras.layers.Layer):
    """The attention masks and segment matrix of one XLNet call (internal).

    Keys are `[memory; tokens]`. A memory position is visible to every query; a
    token `j` is visible to query `i` where it is real and, with a
    `permutation_mask`, where that mask allows it. The content stream also sees its
    own token (the query stream never does). Segments: a memory position counts as
    segment 0 (as in XLNet), and the matrix is True where the two segments differ.
    """

    def call(self, segment_ids, padding_mask, memory_length=0, permutation_mask=None):
        batch, length = ops.shape(segment_ids)[0], ops.shape(segment_ids)[1]
        real = ops.cast(padding_mask, "bool")[:, None, :]  # (batch, 1, length)
        if permutation_mask is None:
            allowed = ops.broadcast_to(real, (batch, length, length))
        else:
            allowed = ops.logical_and(real, ops.cast(permutation_mask, "bool"))
        in_memory = ops.ones((batch, length, memory_length), "bool")
        query_mask = ops.concatenate([in_memory, allowed], axis=-1)
        itself = ops.concatenate(
            [ops.logical_not(in_memory), ops.broadcast_to(ops.eye(length) > 0, ops.shape(allowed))],
            axis=-1,
        )
        content_mask = ops.logical_or(query_mask, itself)
        segment_ids = ops.cast(segment_ids, "int32")
        keys = ops.concatenate([ops.zeros((batch, memory_length), "int32"), segment_ids], axis=1)
        different = ops.not_equal(segment_ids[:, :, None], keys[:, None, :])
        return content_mask, query_mask, different  # each (batch, length, memory + length)

    def compute_output_spec(self, segment_ids, padding_mask, memory_length=0, **kwargs):
        batch, length = segment_ids.shape
        keys = None if length is None else length + memory_length
        return tuple(keras.KerasTensor((batch, length, keys), "bool") for _ in range(3))


@keras_attn_export("keras_attn.models.XLNetBackbone")
class XLNetBackbone(PresetMixin, FunctionalModel):
    """XLNet (Yang et al., 2019): a Transformer-XL encoder read in any factorisation order.

    Token embeddings (no absolute positions) → dropout → `num_layers`
    `TransformerXLBlock`s with relative positions and XLNet's relative segment
    encodings, every position attending to every real one (`attn_type="bi"`) → dropout.
    Called as a functional model it returns the content stream.
    `encode()` is the rest of XLNet: memory of earlier segments (in and out), a
    permutation mask, and the query stream, which starts from a learned
    `mask_embedding` at the positions `target_mapping` selects and sees their
    position but never their token (two-stream attention, section 2.3).

    Args:
        vocabulary_size: number of tokens (XLNet: 32000).
        num_layers: number of layers.
        num_heads: attention heads per layer.
        hidden_dim: width of the model (`d_model`).
        intermediate_dim: feed-forward width (`d_inner`).
        dropout: dropout on embeddings, attention probabilities, sub-layer and
            final outputs.
        activation: feed-forward activation (XLNet: `"gelu"`, exact).
        layer_norm_epsilon: epsilon of every LayerNorm (XLNet: 1e-12).
        clamp_length: clamp the relative distances (XLNet's `clamp_len`; `None`: no clamp).
        initializer_range: stddev of the normal initializer of embeddings and
            kernels (XLNet: 0.02).
        dtype: dtype policy of every layer.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids` (any ints; XLNet's tokenizer
            gives 0, 1 and 2 for `<cls>`) and `padding_mask` (1 for real tokens),
            each `(batch, length)`.

    Returns:
        A dict: `sequence_output` `(batch, length, hidden_dim)`, the content stream.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import XLNetBackbone
    >>> model = XLNetBackbone(100, num_layers=2, num_heads=2, hidden_dim=32,
    ...                       intermediate_dim=64)
    >>> inputs = {"token_ids": np.array([[5, 6, 7, 0]]), "segment_ids": np.zeros((1, 4)),
    ...           "padding_mask": np.array([[1, 1, 1, 0]])}
    >>> tuple(model(inputs)["sequence_output"].shape)
    (1, 4, 32)
    >>> first = model.encode(inputs, memory_length=4)  # memory for the next segment
    >>> second = model.encode(inputs, memories=first["memories"])
    >>> tuple(second["sequence_output"].shape), len(second["memories"])
    ((1, 4, 32), 2)

    References:
        - [Yang et al., 2019](https://arxiv.org/abs/1906.08237)
        - [Dai et al., 2019](https://arxiv.org/abs/1901.02860)
    """

    # Named sizes (`from_size`): a tiny one, XLNet-Base and -Large (Yang et al., 2019),
    # with its 32,000 SentencePiece tokens.
    SIZES = {
        name: dict(
            vocabulary_size=32000,
            num_layers=layers,
            hidden_dim=hidden,
            num_heads=heads,
            intermediate_dim=4 * hidden,
        )
        for name, (layers, hidden, heads) in {
            "tiny": (2, 128, 2),
            "base": (12, 768, 12),
            "large": (24, 1024, 16),
        }.items()
    }

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        clamp_length=None,
        initializer_range=0.02,
        dtype=None,
        **kwargs,
    ):
        self.check_sizes(
            hidden_dim,
            num_heads,
            dropout,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            intermediate_dim=intermediate_dim,
        )
        check_positive_int("clamp_length", clamp_length, allow_none=True)
        check_positive_number("initializer_range", initializer_range)

        # === Layers ===
        def initializer():
            return keras.initializers.RandomNormal(stddev=initializer_range)

        self.token_embedding = keras.layers.Embedding(
            vocabulary_size,
            hidden_dim,
            embeddings_initializer=initializer(),
            dtype=dtype,
            name="token_embedding",
        )
        self.embeddings_dropout = Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.masks = XLNetMasks(dtype=dtype, name="attention_masks")
        self.transformer_layers = [
            TransformerXLBlock(
                num_heads,
                intermediate_dim,
                dropout=dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                segment_attention=True,
                clamp_length=clamp_length,
                kernel_initializer=initializer(),
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.output_dropout = Dropout(dropout, dtype=dtype, name="output_dropout")

        # === Functional model ===
        inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in INPUTS}
        outputs = {"sequence_output": self._stack(inputs)[0]}
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)
        # XLNet's `mask_emb`, the query stream's input (one row, read with ids of 0): not
        # in the functional graph, made after it so every backend tracks it.
        self.mask_embedding = keras.layers.Embedding(
            1, hidden_dim, embeddings_initializer=initializer(), dtype=dtype, name="mask_embedding"
        )
        self.mask_embedding.build((None, None))

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.activation = keras.activations.serialize(keras.activations.get(activation))
        self.layer_norm_epsilon = layer_norm_epsilon
        self.clamp_length = clamp_length
        self.initializer_range = initializer_range

    def _stack(
        self,
        inputs,
        memories=None,
        permutation_mask=None,
        target_mapping=None,
        training=None,
    ):
        """`(content stream, query stream or None, [each layer's input])`."""
        token_ids = inputs["token_ids"]
        memory_length = 0 if memories is None else ops.shape(memories[0])[1]
        content_mask, query_mask, segment_matrix = self.masks(
            inputs["segment_ids"],
            inputs["padding_mask"],
            memory_length=memory_length,
            permutation_mask=permutation_mask,
        )
        h = self.embeddings_dropout(self.token_embedding(token_ids), training=training)
        g = None
        if target_mapping is not None:
            starts = ops.zeros(ops.shape(target_mapping)[:2], "int32")  # (batch, num_predict)
            g = self.embeddings_dropout(self.mask_embedding(starts), training=training)
        layer_inputs = []
        for i, block in enumerate(self.transformer_layers):
            layer_inputs.append(h)
            kwargs = dict(
                memory=None if memories is None else memories[i],
                attention_mask=content_mask,
                segment_matrix=segment_matrix,
                training=training,
            )
            if g is None:
                h = block(h, **kwargs)
            else:
                h, g = block(
                    h,
                    query_stream=g,
                    query_attention_mask=query_mask,
                    target_mapping=target_mapping,
                    **kwargs,
                )
        h = self.output_dropout(h, training=training)
        g = None if g is None else self.output_dropout(g, training=training)
        return h, g, layer_inputs

    def encode(
        self,
        inputs,
        memories=None,
        memory_length=None,
        permutation_mask=None,
        target_mapping=None,
        training=False,
    ):
        """XLNet with memory, a factorisation order and the query stream.

        Args:
            inputs: the call's dict (`token_ids`, `segment_ids`, `padding_mask`).
            memories: optional list of `num_layers` tensors `(batch, memory_len,
                hidden_dim)`, the `memories` an earlier call returned; every memory
                position is visible, and counts as segment 0.
            memory_length: how many of the latest positions the returned
                `memories` keep (`None`: all of `memories` and this call's).
            permutation_mask: optional boolean `(batch, length, length)`, True where
                query `i` may see token `j` (Hugging Face's `perm_mask` is its
                negation: 1 where it may not).
            target_mapping: optional `(batch, num_predict, length)` one-hot rows,
                the positions the query stream predicts; without it there is no
                query stream.
            training: whether dropout is active.

        Returns:
            A dict: `sequence_output` (the content stream), `query_output`
            `(batch, num_predict, hidden_dim)` with a `target_mapping`, and
            `memories`, each layer's input over the latest `memory_length`
            positions, with the gradient stopped.
        """
        if memories is not None:
            memories = list(memories)
            if len(memories) != self.num_layers:
                raise ValueError(
                    f"Expected `memories` for each of the {self.num_layers} layers. "
                    f"Received: {len(memories)} tensors"
                )
        check_positive_int("memory_length", memory_length, allow_none=True)
        inputs = {name: ops.convert_to_tensor(inputs[name]) for name in INPUTS}
        length = inputs["token_ids"].shape[1]
        for name, value, expected in (
            ("permutation_mask", permutation_mask, "(batch, length, length)"),
            ("target_mapping", target_mapping, "(batch, num_predict, length)"),
        ):
            if value is None:
                continue
            shape = tuple(value.shape)
            if len(shape) != 3 or (None not in (length, shape[-1]) and shape[-1] != length):
                raise ValueError(
                    f"Expected `{name}` of shape {expected}, length {length} as `token_ids`. "
                    f"Received: {name}.shape={shape}"
                )
        h, g, layer_inputs = self._stack(
            inputs, memories, permutation_mask, target_mapping, training
        )
        new_memories = [
            next_memory(None if memories is None else memories[i], layer_input, memory_length)
            for i, layer_input in enumerate(layer_inputs)
        ]
        outputs = {"sequence_output": h, "memories": new_memories}
        if g is not None:
            outputs["query_output"] = g
        return outputs

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Loads a Hugging Face XLNet folder (`config.json` with `model_type: "xlnet"`,
        `model.safetensors` or `pytorch_model.bin`): XLNetModel's weights, or a task
        model's (`transformer.` before the names; its heads are listed as unused).

        Needs XLNet's bidirectional attention (`attn_type: "bi"`) without
        `bi_data`, each layer's own `u`, `v`, `s` (`untie_r: true`) and `d_head` =
        `d_model / n_head`; a `ValueError` names any other setting. A missing weight,
        or one whose shape does not fit, is named too.

        Args:
            path: the checkpoint folder.
            **kwargs: constructor arguments to override (`dropout`, `dtype`).

        Returns:
            An `XLNetBackbone` holding the checkpoint's weights; `encode()` then
            equals `transformers.XLNetModel` (its `perm_mask` negated).
        """
        from keras_attn.models.xlnet import xlnet_checkpoint

        return xlnet_checkpoint.load_backbone(cls, path, **kwargs)

    @classmethod
    def pretrained_config(cls, path):
        """The constructor arguments of an XLNet folder's `config.json`."""
        from keras_attn.checkpoints import read_json
        from keras_attn.models.xlnet import xlnet_checkpoint

        return xlnet_checkpoint.backbone_kwargs(read_json(pathlib.Path(path) / "config.json"))

    def save_pretrained(self, path, tokenizer=None):
        """Writes the Hugging Face XLNet layout (`config.json`, `model.safetensors` in
        XLNetLMHeadModel's names, a zero LM bias) that `transformers.AutoModel` and
        `XLNetLMHeadModel` load; the inverse of `from_pretrained`.

        Args:
            path: the folder to write (created if needed).
            tokenizer: must be `None`: XLNet's vocabulary is SentencePiece, which
                this package does not write (a ValueError says so).

        Returns:
            The folder.
        """
        from keras_attn.models.xlnet import xlnet_checkpoint

        if tokenizer is not None:
            raise ValueError(
                "XLNet tokenizes with SentencePiece, not a WordPiece vocabulary; save the "
                "weights with tokenizer=None and copy its spiece.model beside them"
            )
        return xlnet_checkpoint.save_backbone(self, path)

    def get_config(self):
        return {
            **self._base_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "clamp_length": self.clamp_length,
            "initializer_range": self.initializer_range,
        }
