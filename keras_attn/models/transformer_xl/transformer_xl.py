"""Transformer-XL: a causal language model with segment-level recurrence."""

import math

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_non_negative_int, check_positive_int
from keras_attn.layers import Dropout, TransformerXLBlock
from keras_attn.layers.cache_writes import next_memory, update_positions
from keras_attn.models import decoder_embedding as embedding
from keras_attn.models.functional_model import FunctionalModel, NextTokenCompile
from keras_attn.models.generation_mixin import GenerationMixin
from keras_attn.models.layout_maps import LayoutMapMixin
from keras_attn.models.lora import LoraMixin
from keras_attn.models.pipeline import PipelineMixin
from keras_attn.models.presets import PresetMixin


@keras_attn_export("keras_attn.models.TransformerXL")
class TransformerXL(
    PipelineMixin,
    LayoutMapMixin,
    LoraMixin,
    PresetMixin,
    GenerationMixin,
    NextTokenCompile,
    keras.Model,
):
    """Transformer-XL language model (Dai et al., 2019): segments with memory.

    A long sequence is read one segment of `segment_length` tokens at a time;
    each layer's queries attend to its own segment (causally) and to the
    memory: that layer's inputs over the previous `memory_length` positions,
    kept from earlier segments with the gradient stopped ("segment-level
    recurrence", section 3.2). Positions are relative (`TransformerXLBlock`), so
    the memory is not confused with the segment. Token embedding (scaled by
    `sqrt(hidden_dim)`) → dropout → `num_layers` blocks → (pre-LN: a final
    LayerNorm) → logits through the transposed token embedding.

    Calling the model on `(batch, length)` ids runs the segments of that length
    in order, carrying the memory from one to the next (`memory_length=0`: each
    segment alone, the "vanilla" model the paper compares with); this is how
    `fit` trains it, on examples of several consecutive segments.
    `call_segment` is one step with `memories` in and out, `generate` decodes with
    the memory as its cache (greedy, beam search or sampling, as `GPTLanguageModel`:
    a `GenerationConfig`), and `stream_perplexity` reads a long text with a
    memory of any length, longer than in training included (section 4).

    Args:
        vocabulary_size: tokens in the vocabulary.
        num_layers: number of blocks.
        num_heads: attention heads per block.
        hidden_dim: model width.
        intermediate_dim: feed-forward width.
        segment_length: tokens per segment.
        memory_length: positions of memory per layer (0: none).
        dropout: dropout on embeddings, attention probabilities and sub-layer outputs.
        activation: feed-forward activation (the paper: `"relu"`).
        layer_norm_epsilon: epsilon of every LayerNorm.
        norm_first: pre-LN blocks and a final LayerNorm (default: post-LN, as the paper).
        clamp_length: clamp the relative distances (`None`: no clamp).
        pad_token_id: id of padding (the default loss skips it).
        dtype: dtype policy of every layer.
        preprocessor: a `CausalLMPreprocessor`: `fit`, `evaluate`, `predict` then take
            strings and `generate` continues them, as `GPTLanguageModel`'s; `None`:
            token ids only.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: `token_ids` `(batch, length)` int, `length` known when traced.
        training: whether dropout is active.

    Returns:
        `(batch, length, vocabulary_size)` float32 logits; position `t` predicts
        token `t + 1`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import TransformerXL
    >>> model = TransformerXL(100, num_layers=2, num_heads=2, hidden_dim=32,
    ...                       intermediate_dim=64, segment_length=4, memory_length=4)
    >>> tuple(model(np.arange(24).reshape(2, 12) % 100).shape)  # 3 segments
    (2, 12, 100)
    >>> logits, memories = model.call_segment(np.array([[5, 6, 7, 8]]))
    >>> len(memories), tuple(memories[0].shape)  # per layer: (batch, memory, hidden)
    (2, (1, 4, 32))
    >>> model.generate([[5, 6]], max_length=8).shape
    (1, 8)
    >>> from keras_attn.models import GenerationConfig
    >>> beam = GenerationConfig(strategy="beam", num_beams=3, max_length=8)
    >>> model.generate([[5, 6], [7]], config=beam).shape
    (2, 8)

    References:
        - [Dai et al., 2019](https://arxiv.org/abs/1901.02860)
    """

    preprocessor_cls = "CausalLMPreprocessor"  # `isinstance(model, CausalLM)`

    # Named sizes (`from_size`): a tiny one and the paper's WikiText-103 base model
    # (Dai et al., 2019, table 8: 16 layers, d_model 410, 10 heads, d_inner 2100,
    # segments and memory of 150 tokens, 267,735 words).
    SIZES = {
        "tiny": dict(
            vocabulary_size=32000,
            num_layers=2,
            hidden_dim=128,
            num_heads=2,
            intermediate_dim=512,
            segment_length=64,
            memory_length=64,
        ),
        "wt103_base": dict(
            vocabulary_size=267735,
            num_layers=16,
            hidden_dim=410,
            num_heads=10,
            intermediate_dim=2100,
            segment_length=150,
            memory_length=150,
        ),
    }

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        segment_length,
        memory_length,
        dropout=0.1,
        activation="relu",
        layer_norm_epsilon=1e-5,
        norm_first=False,
        clamp_length=None,
        pad_token_id=0,
        dtype=None,
        preprocessor=None,
        **kwargs,
    ):
        FunctionalModel.check_sizes(
            hidden_dim,
            num_heads,
            dropout,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            intermediate_dim=intermediate_dim,
            segment_length=segment_length,
        )
        check_non_negative_int("memory_length", memory_length)
        if hidden_dim % 2:
            raise ValueError(f"Expected an even `hidden_dim`. Received: hidden_dim={hidden_dim}")
        super().__init__(dtype=dtype, **kwargs)
        self.token_embedding = embedding.token_embedding(
            vocabulary_size, hidden_dim, True, dtype, "token_embedding"
        )
        self.embeddings_dropout = Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.transformer_layers = [
            TransformerXLBlock(
                num_heads,
                intermediate_dim,
                dropout=dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                norm_first=norm_first,
                clamp_length=clamp_length,
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
        # Every variable exists from the start (the trainers restore checkpoints first).
        self.token_embedding.build((None, None))
        for block in self.transformer_layers:
            block.build((None, None, hidden_dim))
        if self.final_layer_norm is not None:
            self.final_layer_norm.build((None, None, hidden_dim))
        self.built = True

        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.segment_length = segment_length
        self.memory_length = memory_length
        self.dropout = dropout
        self.activation = keras.activations.serialize(keras.activations.get(activation))
        self.layer_norm_epsilon = layer_norm_epsilon
        self.norm_first = norm_first
        self.clamp_length = clamp_length
        self.pad_token_id = pad_token_id
        self.preprocessor = preprocessor

    def call_segment(self, token_ids, memories=None, memory_length=None, training=None):
        """One segment, with the memory of the earlier ones.

        Args:
            token_ids: `(batch, length)` int, the segment (any length).
            memories: `None` or the list (one per layer) that the previous call
                returned, each `(batch, memory_len, hidden_dim)`.
            memory_length: positions the returned memories keep (default: the
                model's `memory_length`); longer than in training is allowed.
            training: whether dropout is active.

        Returns:
            `(logits, memories)`: `(batch, length, vocabulary_size)` float32 and,
            per layer, its inputs over the last `memory_length` positions of
            `[memories; segment]` (gradient stopped); `None` when `memory_length` is 0.
        """
        memory_length = self.memory_length if memory_length is None else memory_length
        check_non_negative_int("memory_length", memory_length)
        if memories is not None and len(memories) != self.num_layers:
            raise ValueError(
                f"Expected `memories` for each of the {self.num_layers} layers. "
                f"Received: {len(memories)} tensors"
            )
        states, new_memories = self._segment_states(token_ids, memories, memory_length, training)
        return self._logits(states[-1]), (new_memories if memory_length else None)

    def _segment_states(self, token_ids, memories, memory_length, training):
        """`(hidden states, new memories)` of one segment (`hidden_states`' convention)."""
        x = self._embed(token_ids, training)
        states, new_memories = [x], []
        for i, block in enumerate(self.transformer_layers):
            memory = None if memories is None else ops.cast(memories[i], x.dtype)
            if memory_length:
                new_memories.append(next_memory(memory, x, memory_length))
            x = block(x, memory=memory, use_causal_mask=True, training=training)
            states.append(x)
        if self.final_layer_norm is not None:
            states[-1] = self.final_layer_norm(x)
        return states, new_memories

    def hidden_states(self, token_ids, training=False):
        """Every layer's states over `(batch, length)` ids, segment by segment with the
        memory as `call` reads them: `num_layers + 1` tensors `(batch, length, hidden_dim)`
        (the embeddings, each block's output, the last after a pre-LN final LayerNorm)."""
        segments, memories = [], None
        for start in range(0, token_ids.shape[1], self.segment_length):
            states, memories = self._segment_states(
                token_ids[:, start : start + self.segment_length],
                memories,
                self.memory_length,
                training,
            )
            segments.append(states)
            memories = memories or None
        return [ops.concatenate(layer, axis=1) for layer in zip(*segments, strict=True)]

    def call(self, inputs, training=None):
        length = inputs.shape[1]
        if length is None:
            raise ValueError(
                "TransformerXL splits its input into segments of `segment_length` while "
                "traced: the length must be known. Received: token_ids.shape="
                f"{tuple(inputs.shape)}"
            )
        logits, memories = [], None
        for start in range(0, length, self.segment_length):
            segment = inputs[:, start : start + self.segment_length]
            segment_logits, memories = self.call_segment(segment, memories, training=training)
            logits.append(segment_logits)
        return logits[0] if len(logits) == 1 else ops.concatenate(logits, axis=1)

    def compute_output_spec(self, inputs, training=None):
        return keras.KerasTensor((*inputs.shape[:2], self.vocabulary_size), "float32")

    # --- generation: the memory is the cache (GenerationMixin's hooks) ---

    max_sequence_length = None  # relative positions: any length

    def default_generation_length(self):
        """The context of training: `segment_length + memory_length` tokens."""
        return self.segment_length + self.memory_length

    def _decoding_context(self, source):
        return None

    def _empty_caches(self, batch_size, length):
        """Per layer, its inputs at positions `0 ... length - 1`, zero until read."""
        shape = (batch_size, length, self.hidden_dim)
        return tuple(ops.zeros(shape, self.compute_dtype) for _ in self.transformer_layers)

    def _call_decoder(
        self, token_ids, context, caches=None, index=None, training=None, cache_write="slice"
    ):
        """Without caches: the tokens as one causal segment (the whole sequence).

        With caches (per layer, its inputs at every position so far, `(batch,
        cache_len, hidden)`): the tokens are a segment at positions `index ...`, read
        with a memory of the `cache_len` positions before `index` (those before 0
        masked); each layer's inputs are written into its cache at `index ...`. The
        same attention as re-reading the whole sequence, since a memory that covers
        everything before a segment changes nothing (section 3.2).
        """
        x = self._embed(token_ids, training)
        mask, view = None, None
        if caches is not None:
            cache_length, length = caches[0].shape[1], token_ids.shape[1]
            index = ops.cast(index, "int32")
            slots = ops.arange(cache_length, dtype="int32")
            # Memory slot j holds position index - cache_len + j: the cache rolled.
            view = (slots + index) % cache_length
            remembered = slots >= cache_length - index  # position >= 0
            mask = ops.concatenate(
                [
                    ops.broadcast_to(remembered[None, None, :], (1, length, cache_length)),
                    ops.ones((1, length, length), "bool"),
                ],
                axis=-1,
            )  # (1, length, cache_len + length); use_causal_mask adds causality
        updated = []
        for i, block in enumerate(self.transformer_layers):
            memory = None
            if caches is not None:
                memory = ops.take(caches[i], view, axis=1)  # (batch, cache_len, hidden)
                updated.append(update_positions(caches[i], x, index, cache_write))
            x = block(
                x, memory=memory, attention_mask=mask, use_causal_mask=True, training=training
            )
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)
        return x if caches is None else (x, tuple(updated))

    def _logits(self, hidden):
        return self.token_embedding(hidden, reverse=True)  # float32 (reverse_dtype)

    def _embed(self, token_ids, training=None):
        x = self.token_embedding(token_ids) * ops.cast(
            math.sqrt(self.hidden_dim), self.compute_dtype
        )
        return self.embeddings_dropout(x, training=training)

    def stream_perplexity(self, token_ids, num_streams=8, memory_length=None, segment_length=None):
        """Perplexity of a long text read segment by segment with memory.

        The text is cut into `num_streams` equal contiguous parts read side by side
        (Transformer-XL's evaluation); each segment predicts its next tokens from
        itself and the memory, every token but the first of each part once.

        Args:
            token_ids: a 1-D sequence of ids.
            num_streams: parts read in parallel (the batch).
            memory_length: positions of memory (default: the model's; 0: none).
            segment_length: tokens per segment (default: the model's).

        Returns:
            A dict: `perplexity`, `loss` (mean negative log-likelihood, nats) and
            `tokens` (how many were predicted).
        """
        segment_length = segment_length or self.segment_length
        check_positive_int("num_streams", num_streams)
        check_positive_int("segment_length", segment_length)
        ids = np.asarray(token_ids, "int32").reshape(-1)
        part = len(ids) // num_streams
        if part < 2:
            raise ValueError(
                f"Expected at least 2 tokens per stream. Received: {len(ids)} tokens for "
                f"num_streams={num_streams}"
            )
        streams = ids[: part * num_streams].reshape(num_streams, part)
        total, count, memories = 0.0, 0, None
        for start in range(0, part - 1, segment_length):
            inputs = streams[:, start : start + segment_length]
            labels = streams[:, start + 1 : start + segment_length + 1]
            inputs = inputs[:, : labels.shape[1]]
            logits, memories = self.call_segment(inputs, memories, memory_length, training=False)
            log_probs = ops.log_softmax(logits, axis=-1)
            picked = ops.take_along_axis(log_probs, ops.convert_to_tensor(labels)[..., None], -1)
            total -= float(ops.convert_to_numpy(ops.sum(picked)))
            count += labels.size
        loss = total / count
        return {"perplexity": math.exp(loss), "loss": loss, "tokens": count}

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "segment_length": self.segment_length,
            "memory_length": self.memory_length,
            "dropout": self.dropout,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "norm_first": self.norm_first,
            "clamp_length": self.clamp_length,
            "pad_token_id": self.pad_token_id,
            **self.preprocessor_config(),
        }

    @classmethod
    def from_config(cls, config):
        return FunctionalModel.from_config.__func__(cls, cls.with_preprocessor(config))
