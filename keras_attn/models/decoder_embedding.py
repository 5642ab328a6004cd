"""Token + position embeddings of the Transformer and GPT models (internal)."""

import math

import keras
from keras import ops

from keras_attn.layers import LearnedPositionEmbedding, SinusoidalPositionEmbedding, row_products
from keras_attn.layers.quantized_blocks import BlockEmbedding

POSITION_EMBEDDINGS = ("sinusoidal", "learned")
GPT_POSITION_EMBEDDINGS = (*POSITION_EMBEDDINGS, "rotary")  # RoPE: decoder-only models
# RoPE's base wavelength when a decoder's `position_embedding` is "rotary" (Su et al.;
# Llama): rotated queries and keys in every self-attention, nothing added to the tokens.
ROTARY_MAX_WAVELENGTH = 10000.0


def check_position_embedding(position_embedding, choices=POSITION_EMBEDDINGS):
    if position_embedding not in choices:
        raise ValueError(
            f"Expected `position_embedding` to be one of {choices}. "
            f"Received: position_embedding={position_embedding!r}"
        )


def token_embedding(vocabulary_size, hidden_dim, tie_weights, dtype, name, stddev=None):
    """A `ReversibleEmbedding`: `reverse=True` is the (tied) pre-softmax projection.

    Initialised N(0, hidden_dim^-1/2) by default: with the `sqrt(hidden_dim)` input
    scaling the embedded tokens have unit variance, and the tied logits start small.
    """
    return keras.layers.ReversibleEmbedding(
        vocabulary_size,
        hidden_dim,
        tie_weights=tie_weights,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=stddev or hidden_dim**-0.5),
        reverse_dtype="float32",
        dtype=dtype,
        name=name,
    )


def check_model_kernel_formats(kernel_formats, num_layers, tie_weights):
    """A decoder's `kernel_formats` (what stays in GGUF's blocks: `"token_embedding"` ->
    a format, `"transformer_layer_<i>"` -> that block's `kernel_formats`) checked and
    returned as a dict (`{}` for `None`)."""
    if kernel_formats is None:
        return {}
    if not isinstance(kernel_formats, dict):
        raise TypeError(
            f"Expected `kernel_formats` to be a dict. Received: {type(kernel_formats).__name__}"
        )
    names = {"token_embedding", *(f"transformer_layer_{i}" for i in range(num_layers))}
    unknown = sorted(set(kernel_formats) - names)
    if unknown:
        raise ValueError(
            "Expected `kernel_formats` keys 'token_embedding' and 'transformer_layer_<i>' "
            f"(i < {num_layers}). Received: {unknown}"
        )
    if "token_embedding" in kernel_formats and not tie_weights:
        raise ValueError(
            "A token embedding kept in blocks is tied to the output head; an untied one "
            "is not kept. Received: kernel_formats['token_embedding'] with "
            "tie_word_embeddings=False"
        )
    return dict(kernel_formats)


def token_embedding_or_blocks(kernel_formats, vocabulary_size, hidden_dim, tie, dtype, stddev):
    """`token_embedding`'s table, or a `BlockEmbedding` where `kernel_formats` keeps it."""
    if "token_embedding" in kernel_formats:
        return BlockEmbedding(
            vocabulary_size,
            hidden_dim,
            kernel_formats["token_embedding"],
            dtype=dtype,
            name="token_embedding",
        )
    return token_embedding(vocabulary_size, hidden_dim, tie, dtype, "token_embedding", stddev)


def reverse_logits(embedding, hidden):
    """`embedding(hidden, reverse=True)`: the logits of a `ReversibleEmbedding`.

    A table Keras quantized to int8 (its `quantize("int8")`, inputs quantized too)
    multiplies as its own int8 call does, the same arithmetic, on
    `row_products.int8_product` (the rows quantized apart; the tied table by its
    transpose: one row padded to two in a 2-D product, several rows as a `(rows, 1,
    dim)` batch; the forms XLA's CPU backend ran fastest inside a decoding loop).
    Keras's own call on the decoder's `(batch, dim)` step output took Gemma 3 270M's
    greedy decoding at batch 8 to 76 tokens/s (XLA copied the table to int32); these
    forms to about 220, and to 55 at batch 1, where the batched form gave 37
    (docs/speed.md).
    """
    quantizer = getattr(embedding, "inputs_quantizer", None)
    if (
        getattr(embedding, "quantization_mode", None) != "int8"
        or embedding.lora_enabled
        or not quantizer
    ):
        return embedding(hidden, reverse=True)
    dtype = embedding.reverse_dtype or embedding.compute_dtype
    rows = ops.reshape(ops.cast(hidden, dtype), (-1, hidden.shape[-1]))
    if embedding.tie_weights:
        logits = row_products.int8_product(
            rows, embedding._embeddings, embedding.embeddings_scale, quantizer, transposed=True
        )
    else:
        logits = row_products.int8_product(
            rows, embedding.reverse_embeddings, embedding.reverse_embeddings_scale, quantizer
        )
    if embedding.logit_soft_cap is not None:
        logits = ops.tanh(logits / embedding.logit_soft_cap) * embedding.logit_soft_cap
    return ops.reshape(logits, (*ops.shape(hidden)[:-1], -1))


def position_embedding(kind, max_sequence_length, dtype, name):
    """The layer adding positions to the embedded tokens (None for "rotary")."""
    if kind == "rotary":
        return None
    if kind == "learned":
        return LearnedPositionEmbedding(
            max_sequence_length,
            initializer=keras.initializers.RandomNormal(stddev=0.02),
            dtype=dtype,
            name=name,
        )
    return SinusoidalPositionEmbedding(dtype=dtype, name=name)


def embed(tokens, positions, dropout, token_ids, start_index=0, training=None, scale=True):
    """`dropout(E[ids] * sqrt(d_model) + P[start_index:])` (Vaswani et al., 3.4 and 3.5);
    `scale=False` leaves out the `sqrt(d_model)` (GPT-2); `positions=None` adds none
    (rotary positions live in the attention)."""
    x = tokens(token_ids)
    if scale:
        x = x * math.sqrt(x.shape[-1])
    if positions is not None:
        x = x + positions(x, start_index=start_index)
    return dropout(x, training=training)


class DecoderOnlyPass:
    """The pass of the decoder-only language models (GPT's, Llama's, Gemma's): token
    embedding (times `sqrt(hidden_dim)` where `scale_embeddings`) plus positions where
    the model adds them, then `transformer_layers` with or without their caches, the
    final norm where there is one, logits through the token embedding. The model holds
    `token_embedding`, `position_embedding` (`None`: RoPE in the attention),
    `embeddings_dropout`, `transformer_layers` and `final_layer_norm` (or `None`)."""

    position_embedding = None
    scale_embeddings = False

    # --- the decoder, for the functional graph and for generation ---

    def _decoding_context(self, source):
        return None

    def _decoder_blocks(self):
        return self.transformer_layers

    def _call_decoder(
        self, token_ids, context, caches=None, index=None, training=None, cache_write="slice"
    ):
        x = embed(
            self.token_embedding,
            self.position_embedding,
            self.embeddings_dropout,
            token_ids,
            start_index=0 if index is None else index,
            training=training,
            scale=self.scale_embeddings,
        )
        updated = []
        for i, block in enumerate(self.transformer_layers):
            if caches is None:
                x = block(x, training=training)
            else:
                x, cache = block(
                    x,
                    self_attention_cache=caches[i],
                    self_attention_cache_update_index=index,
                    cache_write=cache_write,
                    training=training,
                )
                updated.append(cache)
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)
        return x if caches is None else (x, tuple(updated))

    def _logits(self, hidden):
        return reverse_logits(self.token_embedding, hidden)  # float32 (reverse_dtype)

    def logits_at(self, token_ids, positions):
        """Next-token logits at some positions only: `(batch, n, vocabulary)` for
        `token_ids` `(batch, length)` and `positions` `(batch, n)` int indices. The
        decoder runs over every position; only the asked ones are projected to the
        vocabulary (scoring completions: Gemma 3's 262,144 words made the full logits
        of 8 prompts of 700 tokens 5.9 GB). Equal to `model(token_ids)` there."""
        hidden = self._call_decoder(token_ids, None, training=False)
        positions = keras.ops.convert_to_tensor(positions, "int32")
        picked = keras.ops.take_along_axis(hidden, keras.ops.expand_dims(positions, -1), axis=1)
        return self._logits(picked)
