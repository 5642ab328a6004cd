"""RoBERTa's encoder: BERT's blocks, positions counted over the real tokens."""

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int
from keras_attn.models.bert import BertBackbone
from keras_attn.models.encoder_sizes import BERT_SIZES


@keras_attn_export("keras_attn.models.RobertaBackbone")
class RobertaBackbone(BertBackbone):
    """RoBERTa: BERT's post-LN encoder as Liu et al. (2019) trained it.

    The architecture is BERT's (`BertBackbone`); what differs is what Hugging Face's
    `RobertaModel` does with positions and segments. A token's position counts the
    tokens before it that are not `padding_token_id` (`cumsum(token_ids != pad) - 1`),
    so a left-padded row gets the positions of the same row unpadded; there is one
    segment (`num_segments=1`: every `segment_ids` is 0) and LayerNorm's epsilon is
    1e-5. Checkpoints keep two rows before the first position (the padding index's);
    `from_pretrained` drops them and `save_pretrained` writes them back as zeros.

    Args:
        vocabulary_size: byte-level BPE pieces (RoBERTa: 50265).
        num_layers, num_heads, hidden_dim, intermediate_dim: as `BertBackbone`.
        max_sequence_length: positions (RoBERTa: 512; its checkpoints hold 514 rows).
        num_segments: segment ids (RoBERTa: 1).
        padding_token_id: the id of `<pad>` (RoBERTa: 1); positions skip it.
        layer_norm_epsilon: epsilon of every LayerNorm (RoBERTa: 1e-5).
        **kwargs: the other `BertBackbone` arguments (`dropout`, `activation`,
            `initializer_range`, `dtype`, `name`, ...).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids` and `padding_mask`, each
            `(batch, length)` int; `padding_mask` is 1 for real tokens.

    Returns:
        A dict: `sequence_output` `(batch, length, hidden_dim)` and `pooled_output`
        `(batch, hidden_dim)` (the tanh pooler on `<s>`).

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import RobertaBackbone
    >>> model = RobertaBackbone.from_size("tiny", vocabulary_size=100)
    >>> right = {"token_ids": np.array([[0, 7, 8, 2, 1]]), "segment_ids": np.zeros((1, 5)),
    ...          "padding_mask": np.array([[1, 1, 1, 1, 0]])}
    >>> left = {"token_ids": np.array([[1, 0, 7, 8, 2]]), "segment_ids": np.zeros((1, 5)),
    ...         "padding_mask": np.array([[0, 1, 1, 1, 1]])}
    >>> a = model(right)["sequence_output"][0, :4]
    >>> b = model(left)["sequence_output"][0, 1:]
    >>> bool(np.allclose(a, b, atol=1e-5))  # the same positions, however padded
    True

    References:
        - [Liu et al., 2019, RoBERTa](https://arxiv.org/abs/1907.11692)
    """

    SIZES = {
        name: {
            **size,
            "intermediate_dim": 4 * size["hidden_dim"],
            "vocabulary_size": 50265,
        }
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
        num_segments=1,
        padding_token_id=1,
        layer_norm_epsilon=1e-5,
        **kwargs,
    ):
        check_positive_int("vocabulary_size", vocabulary_size)
        if (
            isinstance(padding_token_id, bool)
            or not isinstance(padding_token_id, int)
            or not 0 <= padding_token_id < vocabulary_size
        ):
            raise ValueError(
                f"Expected `padding_token_id` an int in [0, {vocabulary_size}) (the "
                f"vocabulary). Received: padding_token_id={padding_token_id!r}"
            )
        self.padding_token_id = padding_token_id
        super().__init__(
            vocabulary_size,
            num_layers,
            num_heads,
            hidden_dim,
            intermediate_dim,
            max_sequence_length=max_sequence_length,
            num_segments=num_segments,
            layer_norm_epsilon=layer_norm_epsilon,
            **kwargs,
        )

    def _embed(self, token_ids, segment_ids, training=None):
        """Token + segment + position embeddings, positions counted over non-padding."""
        tokens = self.token_embedding(token_ids)
        real = ops.cast(ops.not_equal(token_ids, self.padding_token_id), "int32")
        positions = ops.maximum(ops.cumsum(real, axis=1) - 1, 0)  # never past the index
        table = self.position_embedding(tokens)[0]  # rows 0 .. length - 1
        x = tokens + self.segment_embedding(segment_ids) + ops.take(table, positions, axis=0)
        x = self.embeddings_dropout(self.embeddings_layer_norm(x), training=training)
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)
        return x

    def get_config(self):
        return {**super().get_config(), "padding_token_id": self.padding_token_id}

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Loads a Hugging Face `roberta` folder (`config.json` and `model.safetensors`
        or `pytorch_model.bin`; a task model's `roberta.` names too). A checkpoint
        without the pooler (`RobertaForSequenceClassification`'s) leaves ours as
        initialised. A missing weight or a shape that does not fit is a `ValueError`
        naming it; unused checkpoint variables are listed in a warning.

        Args:
            path: the checkpoint folder.
            **kwargs: constructor arguments to override (`dropout`, `dtype`).

        Returns:
            A `RobertaBackbone` holding the checkpoint's weights.
        """
        from keras_attn.models.roberta import roberta_checkpoint

        return roberta_checkpoint.load_backbone(cls, path, **kwargs)

    @classmethod
    def pretrained_config(cls, path):
        """The constructor arguments of a checkpoint folder's configuration."""
        from keras_attn.checkpoints import config_file, read_json
        from keras_attn.models.roberta import roberta_checkpoint

        return roberta_checkpoint.backbone_kwargs(read_json(config_file(path)))

    def save_pretrained(self, path, model_type=None, tokenizer=None):
        """Writes the Hugging Face `roberta` folder `transformers.AutoModel` loads:
        `config.json`, `model.safetensors` (the position table with its two leading
        rows, zeros) and, with a `RobertaTokenizer`, `vocab.json`, `merges.txt` and
        `tokenizer_config.json`.

        Args:
            path: the folder to write (created if needed).
            model_type: `None` or `"roberta"`.
            tokenizer: a `keras_attn.models.roberta.RobertaTokenizer` to write too.

        Returns:
            The folder.

        Raises:
            ValueError: naming what RoBERTa cannot hold (a `score` other than
                `"scaled_dot"`, `norm_first`, a factorised embedding, shared layers).

        Example:

        >>> import tempfile
        >>> from keras_attn.models import RobertaBackbone
        >>> backbone = RobertaBackbone.from_size("tiny", vocabulary_size=100)
        >>> folder = backbone.save_pretrained(tempfile.mkdtemp())
        >>> sorted(p.name for p in folder.iterdir())
        ['config.json', 'model.safetensors']
        >>> RobertaBackbone.from_pretrained(folder).max_sequence_length
        512
        """
        from keras_attn.models.roberta import roberta_checkpoint

        return roberta_checkpoint.save_backbone(self, path, model_type, tokenizer)
