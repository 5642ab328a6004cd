"""ERNIE's pre-training: masked LM, next sentence, and the denoising entity
auto-encoder (dEA)."""

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_rate
from keras_attn.models.bert import bert_kernel_initializer, check_sentence_objective
from keras_attn.models.ernie.ernie_backbone import ErnieBackbone, unread_by_token_heads
from keras_attn.models.masked_lm_head import MaskedLMHead
from keras_attn.models.task import Task, without_weights_of


class EntityChoiceHead(keras.layers.Layer):
    """dEA's output: each token's distribution over its sequence's entities,
    `softmax_j(linear(w_i) . e_j)` (Zhang et al., eq. 7), the candidates' vectors read
    from the backbone's entity table (not owned here; internal to `ErniePretrainer`)."""

    def __init__(self, entity_embedding, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self._embeddings = lambda: entity_embedding.embeddings  # not tracked twice
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, sequence_shape, candidates_shape):
        self.dense = keras.layers.Dense(
            self._embeddings().shape[1], kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy, name="dense",
        )  # fmt: skip
        self.dense.build(sequence_shape)
        self.built = True

    def call(self, sequence, candidates):
        queries = self.dense(sequence)  # (batch, length, entity_dim)
        vectors = ops.take(ops.cast(self._embeddings(), queries.dtype), candidates, axis=0)
        logits = ops.cast(ops.einsum("bld,bcd->blc", queries, vectors), "float32")
        # Padding candidates (id 0) can never be chosen.
        return ops.where(ops.greater(candidates, 0)[:, None, :], logits, -1e9)

    def compute_output_spec(self, sequence, candidates):
        shape = (sequence.shape[0], sequence.shape[1], candidates.shape[1])
        return keras.KerasTensor(shape, dtype="float32")


@keras_attn_export("keras_attn.models.ErniePretrainer")
class ErniePretrainer(Task):
    """An `ErnieBackbone` with ERNIE's pre-training heads, losses summed: BERT's masked
    LM and next-sentence prediction, and the denoising entity auto-encoder.

    dEA (Zhang et al., 2019, section 3.4): some token-entity alignments of the input
    are corrupted (`dea_inputs`: 5% to a random entity, 15% removed) and every token
    that had an entity predicts it among the entities of its sequence
    (`entity_candidates`): `p(e_j | w_i) = softmax_j(linear(w_i) . e_j)` over the
    K-Encoder's token output and the (frozen) entity vectors.

    Args:
        backbone: an `ErnieBackbone`.
        sentence_objective: `"nsp"` (default, the paper's), `"sop"` or `"none"`.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with the backbone's inputs (`entity_ids` corrupted),
            `masked_positions` `(batch, predictions)` and `entity_candidates`
            `(batch, candidates)` (entity ids, 0 for padding).

    Returns:
        A dict: `mlm_logits` `(batch, predictions, vocabulary_size)`, `dea_logits`
        `(batch, length, candidates)` and, unless `"none"`, `nsp_logits` (or
        `sop_logits`) `(batch, 2)`; float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import ErnieBackbone, ErniePretrainer
    >>> backbone = ErnieBackbone.from_size("tiny", vocabulary_size=100, num_entities=20)
    >>> pretrainer = ErniePretrainer(backbone)
    >>> x = {"token_ids": np.array([[2, 4, 8, 3]]), "segment_ids": np.zeros((1, 4)),
    ...      "padding_mask": np.ones((1, 4)), "entity_ids": np.array([[0, 0, 5, 0]]),
    ...      "masked_positions": np.array([[1]]), "entity_candidates": np.array([[5, 9, 0]])}
    >>> {k: tuple(v.shape) for k, v in sorted(pretrainer(x).items())}
    {'dea_logits': (1, 4, 3), 'mlm_logits': (1, 1, 100), 'nsp_logits': (1, 2)}

    References:
        - [Zhang et al., 2019, ERNIE](https://arxiv.org/abs/1905.07129)
    """

    backbone_cls = ErnieBackbone

    def __init__(self, backbone, sentence_objective="nsp", **kwargs):
        self.check_backbone(backbone)
        check_sentence_objective(sentence_objective)
        initializer = bert_kernel_initializer(backbone.initializer_range)

        # === Layers ===
        self.backbone = backbone
        self.masked_lm_head = MaskedLMHead(
            backbone.token_embedding, layer_norm_epsilon=backbone.layer_norm_epsilon,
            kernel_initializer=initializer, dtype=backbone.dtype_policy, name="mlm_logits",
        )  # fmt: skip
        self.entity_head = EntityChoiceHead(
            backbone.entity_embedding, kernel_initializer=initializer,
            dtype=backbone.dtype_policy, name="dea_logits",
        )  # fmt: skip
        self.sentence_head = None
        if sentence_objective != "none":
            self.sentence_head = keras.layers.Dense(
                2, kernel_initializer=initializer, dtype="float32",
                name=f"{sentence_objective}_logits",
            )  # fmt: skip

        # === Functional model ===
        inputs = dict(backbone.input)
        for name in ("masked_positions", "entity_candidates"):
            inputs[name] = keras.Input((None,), dtype="int32", name=name)
        features = backbone({k: inputs[k] for k in backbone.input})
        sequence = features["sequence_output"]
        outputs = {
            "mlm_logits": self.masked_lm_head(sequence, inputs["masked_positions"]),
            "dea_logits": self.entity_head(sequence, inputs["entity_candidates"]),
        }
        if self.sentence_head is not None:
            outputs[f"{sentence_objective}_logits"] = self.sentence_head(features["pooled_output"])
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.sentence_objective = sentence_objective

    def compile(self, optimizer="adam", loss=None, metrics=None, weighted_metrics=None, **kwargs):
        """Defaults: summed sparse cross-entropies and each head's accuracy; the masked
        LM's and dEA's losses are means over their weighted positions (BERT's reference
        code divides by the weights' sum: a mean over all positions would shrink dEA's,
        whose few linked tokens sit among many, by the sequence's share of them)."""
        heads = ["mlm_logits", "dea_logits"]
        if self.sentence_head is not None:
            heads.append(f"{self.sentence_objective}_logits")
        per_target = {"mlm_logits", "dea_logits"}
        loss = loss or {
            head: keras.losses.SparseCategoricalCrossentropy(
                from_logits=True,
                reduction="mean_with_sample_weight"
                if head in per_target
                else "sum_over_batch_size",
            )
            for head in heads
        }
        if weighted_metrics is None:
            weighted_metrics = {
                head: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")] for head in heads
            }
        super().compile(
            optimizer=optimizer, loss=loss, metrics=metrics, weighted_metrics=weighted_metrics,
            **kwargs,
        )  # fmt: skip

    @property
    def trainable_weights(self):
        unread = unread_by_token_heads(self.backbone, pooler=self.sentence_head is None)
        return without_weights_of(super().trainable_weights, unread)

    @property
    def trainable_variables(self):  # what the trainers and the optimizer's build read
        return self.trainable_weights

    def get_config(self):
        config = super().get_config()
        config.update({"sentence_objective": self.sentence_objective})
        return config


@keras_attn_export("keras_attn.models.dea_inputs")
def dea_inputs(entity_ids, num_entities, max_candidates=None, replace_rate=0.05,
               remove_rate=0.15, seed=0):  # fmt: skip
    """dEA's corruption and targets for a batch of aligned entity ids.

    Of the tokens with an entity, `replace_rate` get a random entity (from 1 to
    `num_entities`) and `remove_rate` lose theirs (the paper's 5% and 15%); the rest
    keep it. Every token that had an entity is a target: the index of its entity among
    its row's distinct entities (`entity_candidates`, in order of first mention,
    padded with 0). A row with more than `max_candidates` distinct entities keeps the
    first ones, and tokens of the others are not targets.

    Args:
        entity_ids: int array `(batch, length)`, 0 where a token has no entity.
        num_entities: the entities a random replacement is drawn from.
        max_candidates: candidates per row (default: the most any row has).
        replace_rate, remove_rate: the corruption's shares.
        seed: the random draws' seed.

    Returns:
        A dict of numpy arrays: `entity_ids` (corrupted) `(batch, length)`,
        `entity_candidates` `(batch, max_candidates)`, `dea_labels` and `dea_weights`
        `(batch, length)`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import dea_inputs
    >>> out = dea_inputs(np.array([[0, 7, 0, 3, 7]]), num_entities=9, remove_rate=0.0,
    ...                  replace_rate=0.0)
    >>> out["entity_candidates"].tolist(), out["dea_labels"].tolist(), out["dea_weights"].tolist()
    ([[7, 3]], [[0, 0, 0, 1, 0]], [[0.0, 1.0, 0.0, 1.0, 1.0]])
    """
    entity_ids = np.asarray(entity_ids)
    if entity_ids.ndim != 2 or not np.issubdtype(entity_ids.dtype, np.integer):
        raise ValueError(
            "Expected `entity_ids` an int array (batch, length). Received: "
            f"{entity_ids.dtype} of shape {entity_ids.shape}"
        )
    check_positive_int("num_entities", num_entities)
    check_positive_int("max_candidates", max_candidates, allow_none=True)
    check_rate("replace_rate", replace_rate)
    check_rate("remove_rate", remove_rate)
    if replace_rate + remove_rate > 1:
        raise ValueError(
            f"Expected `replace_rate + remove_rate` <= 1. Received: {replace_rate} + {remove_rate}"
        )
    if entity_ids.min(initial=0) < 0 or entity_ids.max(initial=0) > num_entities:
        raise ValueError(
            f"Expected `entity_ids` in [0, num_entities={num_entities}]. Received: values "
            f"from {entity_ids.min()} to {entity_ids.max()}"
        )
    rows = [list(dict.fromkeys(row[row > 0].tolist())) for row in entity_ids]
    width = max_candidates or max([len(r) for r in rows] + [1])
    candidates = np.zeros((len(rows), width), "int32")
    labels = np.zeros(entity_ids.shape, "int32")
    weights = np.zeros(entity_ids.shape, "float32")
    for i, row in enumerate(rows):
        kept = {entity: j for j, entity in enumerate(row[:width])}
        candidates[i, : len(kept)] = list(kept)
        for position in np.flatnonzero(entity_ids[i]):
            j = kept.get(int(entity_ids[i, position]))
            if j is not None:
                labels[i, position], weights[i, position] = j, 1.0
    rng = np.random.default_rng(seed)
    draw = rng.random(entity_ids.shape)
    aligned = entity_ids > 0
    corrupted = np.where(aligned & (draw < remove_rate), 0, entity_ids)
    replaced = aligned & (draw >= remove_rate) & (draw < remove_rate + replace_rate)
    corrupted = np.where(replaced, rng.integers(1, num_entities + 1, entity_ids.shape), corrupted)
    return {
        "entity_ids": corrupted.astype("int32"),
        "entity_candidates": candidates,
        "dea_labels": labels,
        "dea_weights": weights,
    }
