"""The BERT encoder as a functional Keras model (and ALBERT's variations)."""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_positive_number
from keras_attn.layers import Dropout, LearnedPositionEmbedding, TransformerEncoderBlock
from keras_attn.models.bert.layer_sharing import encoder_blocks, sharing_mode
from keras_attn.models.encoder_sizes import BERT_SIZES
from keras_attn.models.functional_model import FunctionalModel
from keras_attn.models.presets import PresetMixin


def bert_kernel_initializer(stddev=0.02):
    """BERT's initializer: truncated normal, stddev 0.02 ("initializer_range")."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras_attn_export("keras_attn.models.BertBackbone")
class BertBackbone(PresetMixin, FunctionalModel):
    """BERT: token + segment + position embeddings, then a stack of encoder blocks.

    "The input embeddings are the sum of the token embeddings, the segmentation
    embeddings and the position embeddings" (Devlin et al., 2018), followed by
    LayerNorm and dropout, then `num_layers` Transformer encoder blocks with the
    exact (erf) GELU, and a tanh pooler on the first (`[CLS]`) token. ALBERT's two
    parameter reductions (Lan et al., 2019) are options: `embedding_dim` smaller
    than `hidden_dim` factorises the embedding (`V x E + E x H` instead of
    `V x H`), and `share_layers` shares blocks' weights across layers.

    Args:
        vocabulary_size: number of WordPiece tokens (BERT: 30522).
        num_layers: number of encoder blocks (L).
        num_heads: attention heads per block (A).
        hidden_dim: width of the encoder (H).
        intermediate_dim: feed-forward width (BERT: 4 H).
        max_sequence_length: positions in the learned table (BERT: 512).
        num_segments: segment (token type) ids (BERT: 2).
        dropout: dropout on embeddings, attention probabilities, sub-layer outputs.
        norm_first: `False` for BERT's post-LN blocks; `True` for pre-LN, with a
            final LayerNorm after the stack.
        score: scoring function of every attention layer (default `"scaled_dot"`).
        embedding_dim: width of the embeddings (`None`: `hidden_dim`); smaller
            values add an `embedding_projection` to `hidden_dim` (ALBERT).
        share_layers: ALBERT's sharing: `"none"`, `"attention"` or `"feedforward"`
            (every block uses the first one's), `"all"` (one block for every layer);
            `True` and `False` mean `"all"` and `"none"`.
        activation: feed-forward activation; `"gelu"` is the exact erf form of the
            original BERT and Hugging Face, `keras_attn.layers.gelu_approximate`
            the tanh form keras-hub uses.
        layer_norm_epsilon: epsilon of every LayerNorm (BERT: 1e-12).
        initializer_range: stddev of the truncated-normal initializer of every
            kernel and embedding (BERT: 0.02, at every size). Small models on small
            data learn attention patterns much sooner from a larger value (e.g.
            0.1 for `hidden_dim=64`); the task heads use the same value.
        dtype: dtype policy of every layer (e.g. `"mixed_float16"`).
        shared_embeddings: another `BertBackbone` whose token, segment and position
            embeddings and embedding LayerNorm this one uses, the same variables
            (ELECTRA's generator shares its discriminator's; `embedding_dim` is then
            theirs). Not part of `get_config`: the model that shares rebuilds it.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids` and `padding_mask`, each
            `(batch, length)` int; `padding_mask` is 1 for real tokens.

    Returns:
        A dict: `sequence_output` `(batch, length, hidden_dim)` and
        `pooled_output` `(batch, hidden_dim)`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone
    >>> model = BertBackbone.from_size("tiny", vocabulary_size=1000)
    >>> inputs = {
    ...     "token_ids": np.array([[101, 7, 8, 102, 0]]),
    ...     "segment_ids": np.zeros((1, 5), "int32"),
    ...     "padding_mask": np.array([[1, 1, 1, 1, 0]]),
    ... }
    >>> outputs = model(inputs)
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 128), (1, 128))
    >>> [tuple(m.shape) for m in model.attention_maps(inputs)]  # per layer: (batch, heads, q, k)
    [(1, 2, 5, 5), (1, 2, 5, 5)]

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805)
        - [Lan et al., 2019, ALBERT](https://arxiv.org/abs/1909.11942)
    """

    # Named sizes (`from_size`), with BERT's WordPiece vocabulary.
    SIZES = {
        name: {**size, "intermediate_dim": 4 * size["hidden_dim"], "vocabulary_size": 30522}
        for name, size in BERT_SIZES.items()
    }

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        max_sequence_length=512,
        num_segments=2,
        dropout=0.1,
        norm_first=False,
        score="scaled_dot",
        embedding_dim=None,
        share_layers="none",
        activation="gelu",
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        dtype=None,
        *,
        shared_embeddings=None,
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
            num_segments=num_segments,
        )
        check_positive_int("embedding_dim", embedding_dim, allow_none=True)
        check_positive_number("initializer_range", initializer_range)
        share_layers = sharing_mode(share_layers)
        embedding_width = embedding_dim or hidden_dim

        # === Layers ===
        def embedding(input_dim, name):
            return keras.layers.Embedding(
                input_dim,
                embedding_width,
                embeddings_initializer=bert_kernel_initializer(initializer_range),
                dtype=dtype,
                name=name,
            )

        if shared_embeddings is not None:  # ELECTRA's generator: the discriminator's tables
            self._check_shareable(
                shared_embeddings, vocabulary_size, num_segments, max_sequence_length
            )
            self.token_embedding = shared_embeddings.token_embedding
            self.segment_embedding = shared_embeddings.segment_embedding
            self.position_embedding = shared_embeddings.position_embedding
            self.embeddings_layer_norm = shared_embeddings.embeddings_layer_norm
            if embedding_dim not in (None, self.token_embedding.output_dim):
                raise ValueError(
                    "Expected `embedding_dim` None or the shared embeddings' width "
                    f"{self.token_embedding.output_dim}. Received: embedding_dim={embedding_dim}"
                )
            embedding_width = self.token_embedding.output_dim
            embedding_dim = None if embedding_width == hidden_dim else embedding_width
        else:
            self.token_embedding = embedding(vocabulary_size, "token_embedding")
            self.segment_embedding = embedding(num_segments, "segment_embedding")
            self.position_embedding = LearnedPositionEmbedding(
                max_sequence_length,
                initializer=bert_kernel_initializer(initializer_range),
                dtype=dtype,
                name="position_embedding",
            )
            self.embeddings_layer_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=dtype, name="embeddings_layer_norm"
            )
        self.embeddings_dropout = Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.embedding_projection = None
        if embedding_width != hidden_dim:
            self.embedding_projection = keras.layers.Dense(
                hidden_dim,
                kernel_initializer=bert_kernel_initializer(initializer_range),
                dtype=dtype,
                name="embedding_projection",
            )

        def block(name, **sharing):
            return TransformerEncoderBlock(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                norm_first=norm_first,
                score=score,
                kernel_initializer=bert_kernel_initializer(initializer_range),
                dtype=dtype,
                name=name,
                **sharing,
            )

        self.transformer_layers = encoder_blocks(block, num_layers, share_layers)
        self.final_layer_norm = None
        if norm_first:
            self.final_layer_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=dtype, name="final_layer_norm"
            )
        self.pooled_dense = keras.layers.Dense(
            hidden_dim,
            activation="tanh",
            kernel_initializer=bert_kernel_initializer(initializer_range),
            dtype=dtype,
            name="pooled_dense",
        )

        # === Functional model ===
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input((None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
        x = self._embed(token_ids, segment_ids)
        for transformer_layer in self.transformer_layers:
            x = transformer_layer(x, padding_mask=padding_mask)
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)
        pooled = self.pooled_dense(x[:, 0, :])  # the [CLS] token
        super().__init__(
            inputs={
                "token_ids": token_ids,
                "segment_ids": segment_ids,
                "padding_mask": padding_mask,
            },
            outputs={"sequence_output": x, "pooled_output": pooled},
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.dropout = dropout
        self.norm_first = norm_first
        self.score = self.transformer_layers[0].score
        self.embedding_dim = embedding_dim
        self.share_layers = share_layers
        self.activation = keras.activations.serialize(keras.activations.get(activation))
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range

    @staticmethod
    def _check_shareable(source, vocabulary_size, num_segments, max_sequence_length):
        if not isinstance(source, BertBackbone):
            raise TypeError(f"Expected a BertBackbone. Received: shared_embeddings={source!r:.60}")
        ours = (vocabulary_size, num_segments, max_sequence_length)
        theirs = (source.vocabulary_size, source.num_segments, source.max_sequence_length)
        if ours != theirs:
            raise ValueError(
                "Expected the same vocabulary_size, num_segments and max_sequence_length "
                f"as `shared_embeddings`. Received: {ours}, shared_embeddings has {theirs}"
            )

    def _embed(self, token_ids, segment_ids, training=None):
        """Token + segment + position embeddings, LayerNorm, dropout (and projection)."""
        tokens = self.token_embedding(token_ids)
        x = tokens + self.segment_embedding(segment_ids) + self.position_embedding(tokens)
        x = self.embeddings_dropout(self.embeddings_layer_norm(x), training=training)
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)
        return x

    def intermediate_outputs(self, inputs, training=None):
        """Every layer's output and attention, as knowledge distillation reads them.

        Runs the backbone layer by layer (the same computation as `call`), keeping
        what the functional graph does not return.

        Args:
            inputs: a dict with `token_ids`, `segment_ids`, `padding_mask`.
            training: dropout on or off.

        Returns:
            A dict: `embeddings` `(batch, length, hidden_dim)` (the first block's
            input), `hidden_states` (a list with each block's output), `attention`
            (a list with each block's `(batch, heads, length, length)` attention
            probabilities, queries on axis 2), `sequence_output` and
            `pooled_output` (what `call` returns).
        """
        padding_mask = keras.ops.convert_to_tensor(inputs["padding_mask"])
        x = self._embed(inputs["token_ids"], inputs["segment_ids"], training=training)
        outputs = {"embeddings": x, "hidden_states": [], "attention": []}
        for transformer_layer in self.transformer_layers:
            x, scores = transformer_layer(
                x, padding_mask=padding_mask, training=training, return_attention_scores=True
            )
            outputs["hidden_states"].append(x)
            outputs["attention"].append(scores)
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)
        outputs["sequence_output"] = x
        outputs["pooled_output"] = self.pooled_dense(x[:, 0, :])
        return outputs

    def attention_maps(self, inputs):
        """The self-attention probabilities of every layer for `inputs` (inference mode).

        Args:
            inputs: a dict with `token_ids`, `segment_ids`, `padding_mask`.

        Returns:
            A list with one `(batch, heads, length, length)` tensor per layer
            (queries on axis 2, keys on axis 3).
        """
        return self.intermediate_outputs(inputs, training=False)["attention"]

    def get_config(self):
        return {
            **self._base_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "max_sequence_length": self.max_sequence_length,
            "num_segments": self.num_segments,
            "dropout": self.dropout,
            "norm_first": self.norm_first,
            "score": self.score,
            "embedding_dim": self.embedding_dim,
            "share_layers": self.share_layers,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
        }

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Loads an encoder checkpoint folder: Hugging Face or original Google TF1 layout.

        Hugging Face: `config.json` and `model.safetensors` (or `pytorch_model.bin`,
        which needs torch), named by its `model_type`: `bert`, `electra`, `albert`
        (one shared layer, factorised embedding) or `distilbert` (no segment
        embedding: ours is zeros). ELECTRA and DistilBERT have no tanh pooler (ours
        keeps its initialisation). TF1: `bert_config.json` and `bert_model.ckpt.*`. A
        missing weight, or an override that would leave weights unloaded, raises a
        `ValueError` naming it; unused checkpoint variables are listed in a warning.

        Args:
            path: the checkpoint folder.
            **kwargs: constructor arguments to override (e.g. `dropout`, `dtype`).

        Returns:
            A `BertBackbone` holding the checkpoint's weights.
        """
        from keras_attn.models.bert import bert_checkpoint

        return bert_checkpoint.load_backbone(cls, path, **kwargs)

    @classmethod
    def pretrained_config(cls, path):
        """The constructor arguments of a checkpoint folder's configuration."""
        from keras_attn.models.bert import bert_checkpoint

        return bert_checkpoint.backbone_kwargs(bert_checkpoint.read_config(path))

    def save_pretrained(self, path, model_type=None, tokenizer=None):
        """Writes the Hugging Face layout that `transformers.AutoModel` loads.

        `config.json` and `model.safetensors` (and, with a tokenizer, `vocab.txt`
        and `tokenizer_config.json`), so a backbone trained here can be published
        and used from `transformers`. The inverse of `from_pretrained`.

        Args:
            path: the folder to write (created if needed).
            model_type: `"bert"`, `"electra"`, `"albert"` or `"distilbert"`;
                `None` picks ALBERT for shared layers, ELECTRA for a factorised
                embedding, else BERT. ELECTRA and DistilBERT have no pooler (ours is
                left out); DistilBERT has no segment embedding (ours must be zero).
            tokenizer: a `keras_attn.data.WordPieceTokenizer` whose vocabulary to
                write too.

        Returns:
            The folder.

        Raises:
            ValueError: naming what the family cannot hold (a `score` other than
                `"scaled_dot"`, `norm_first`, weights the `model_type` lacks).

        Example:

        >>> import tempfile
        >>> from keras_attn.models import BertBackbone
        >>> backbone = BertBackbone.from_size("tiny", vocabulary_size=100)
        >>> folder = backbone.save_pretrained(tempfile.mkdtemp())
        >>> sorted(p.name for p in folder.iterdir())
        ['config.json', 'model.safetensors']
        >>> BertBackbone.from_pretrained(folder).num_layers
        2
        """
        from keras_attn.models.bert import bert_checkpoint

        return bert_checkpoint.save_backbone(self, path, model_type, tokenizer)
