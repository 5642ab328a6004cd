"""ELECTRA pre-training: a small generator fills the masked positions, a discriminator
tells for every token whether it was replaced (Clark et al., 2020)."""

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_number
from keras_attn.models.bert import electra_diagnostics as diagnostics
from keras_attn.models.bert.bert_backbone import BertBackbone, bert_kernel_initializer
from keras_attn.models.bert.bert_task import without_poolers
from keras_attn.models.bert.electra_generators import sharing_embeddings
from keras_attn.models.functional_model import CompiledOnLoad
from keras_attn.models.layout_maps import LayoutMapMixin
from keras_attn.models.lora import LoraMixin
from keras_attn.models.masked_lm_head import MaskedLMHead

BACKBONE_INPUTS = ("token_ids", "segment_ids", "padding_mask")


@keras_attn_export("keras_attn.models.ElectraPretrainer")
class ElectraPretrainer(LayoutMapMixin, LoraMixin, CompiledOnLoad, keras.Model):
    """Replaced token detection: a generator and a discriminator trained together.

    The generator (a small `BertBackbone` with a tied masked-LM head) predicts the
    masked positions; a token is sampled from its softmax at each one (no gradient
    flows through the sample) and written into the input; the discriminator (the
    `BertBackbone` that fine-tunes afterwards) scores every real token: replaced or
    original. A sample equal to the original token counts as original. The two share
    the token, segment and position embeddings and their LayerNorm (one set of
    variables), as in the paper. The loss is `MLM + rtd_weight * RTD` (the paper's
    lambda = 50), each averaged over its positions; `fit` reports `mlm_loss`,
    `rtd_loss`, `mlm_accuracy`, `rtd_accuracy`, `replaced` (the share of real
    tokens the generator changed), and what the discriminator has learned:
    `rtd_auc`, `rtd_recall` and, given `frequent_ids`, the same among frequent
    pieces (`keras_attn.models.bert.electra_diagnostics`).

    Options from the paper and Google's code: `generator_warmup_steps` of masked LM
    alone, then `rtd_ramp_steps` over which the replaced-token weight rises to
    `rtd_weight`; `uniform_generator`, the control (uniform replacements). Ours:
    `unigram_generator` (replacements by corpus frequency, context-free) and
    `uniform_warmup_steps` (uniform ones first). The step count is a weight: a
    resumed run goes on where the schedule was.

    Args:
        generator: a `BertBackbone` no wider than the discriminator (the paper:
            1/4 to 1/2 of its `hidden_dim`), whose embedding width is the
            discriminator's (give it `embedding_dim` where the hidden widths
            differ). It is rebuilt on the discriminator's embeddings; its other
            weights are kept.
        discriminator: a `BertBackbone` (post-LN, as BERT).
        rtd_weight: lambda, the weight of the replaced-token loss (default 50).
        temperature: of the generator's softmax when sampling (default 1).
        seed: seed of the sampling (`None`: random).
        generator_warmup_steps: training steps of masked LM alone before the
            replaced-token loss counts (default 0).
        rtd_ramp_steps: steps over which the replaced-token weight then rises
            linearly from 0 to `rtd_weight` (default 0: at once).
        uniform_generator: replacements drawn uniformly from the vocabulary (the
            control), not from the generator (default False).
        uniform_warmup_steps: training steps whose replacements are drawn uniformly
            before the generator's take over (default 0).
        unigram_generator: replacements drawn from `unigram_counts`' frequencies
            (a control), not from the generator (default False).
        unigram_counts: `(vocabulary_size,)` counts of each id in the corpus; kept
            as a weight (saved with the model).
        frequent_ids: ids of the corpus's most frequent pieces, for the
            `frequent_rtd_*` metrics (default None: not reported).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids` (masked, as `MaskedLMMasker` makes them),
            `segment_ids`, `padding_mask` `(batch, length)`, and `masked_positions`,
            `masked_ids` (the original tokens there), `masked_weights` (0 for
            padding) `(batch, predictions)`.

    Returns:
        A dict: `mlm_logits` `(batch, predictions, vocabulary_size)`, `rtd_logits`
        `(batch, length)` (float32), `rtd_labels` `(batch, length)` (1: replaced)
        and `corrupted_ids`, the discriminator's input.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone, ElectraPretrainer
    >>> discriminator = BertBackbone(100, 2, 2, 32, 64, max_sequence_length=8)
    >>> generator = BertBackbone(100, 1, 2, 8, 16, max_sequence_length=8, embedding_dim=32)
    >>> pretrainer = ElectraPretrainer(generator, discriminator, seed=0)
    >>> x = {"token_ids": np.array([[2, 7, 4, 9, 4, 3, 0, 0]]),
    ...      "segment_ids": np.zeros((1, 8), "int32"),
    ...      "padding_mask": np.array([[1, 1, 1, 1, 1, 1, 0, 0]]),
    ...      "masked_positions": np.array([[2, 4]]), "masked_ids": np.array([[8, 5]]),
    ...      "masked_weights": np.ones((1, 2), "float32")}
    >>> outputs = pretrainer(x)
    >>> tuple(outputs["mlm_logits"].shape), tuple(outputs["rtd_logits"].shape)
    ((1, 2, 100), (1, 8))
    >>> pretrainer.generator.token_embedding is discriminator.token_embedding
    True

    References:
        - [Clark et al., 2020, ELECTRA](https://arxiv.org/abs/2003.10555)
    """

    def __init__(
        self,
        generator,
        discriminator,
        rtd_weight=50.0,
        temperature=1.0,
        seed=None,
        generator_warmup_steps=0,
        rtd_ramp_steps=0,
        uniform_generator=False,
        uniform_warmup_steps=0,
        unigram_generator=False,
        unigram_counts=None,
        frequent_ids=None,
        **kwargs,
    ):
        for name, backbone in (("generator", generator), ("discriminator", discriminator)):
            if not isinstance(backbone, BertBackbone):
                raise TypeError(
                    f"Expected `{name}` to be a BertBackbone. Received: {type(backbone).__name__}"
                )
        if generator.hidden_dim > discriminator.hidden_dim:
            raise ValueError(
                "Expected a generator no wider than its discriminator (the paper: 1/4 to 1/2). "
                f"Received: generator hidden_dim={generator.hidden_dim}, "
                f"discriminator hidden_dim={discriminator.hidden_dim}"
            )
        check_positive_number("rtd_weight", rtd_weight)
        check_positive_number("temperature", temperature)
        for name, steps in (
            ("generator_warmup_steps", generator_warmup_steps),
            ("rtd_ramp_steps", rtd_ramp_steps),
            ("uniform_warmup_steps", uniform_warmup_steps),
        ):
            if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
                raise ValueError(f"Expected `{name}` to be an integer >= 0. Received: {steps!r}")
        if frequent_ids is not None:
            frequent_ids = [int(i) for i in frequent_ids]
            if not all(0 <= i < discriminator.vocabulary_size for i in frequent_ids):
                raise ValueError(
                    "Expected `frequent_ids` in [0, vocabulary_size="
                    f"{discriminator.vocabulary_size}). Received: {frequent_ids[:10]}..."
                )
        super().__init__(**kwargs)

        # === Layers ===
        self.discriminator = discriminator
        self.generator = sharing_embeddings(generator, discriminator)
        self.masked_lm_head = MaskedLMHead(
            discriminator.token_embedding,
            activation=generator.activation,
            layer_norm_epsilon=generator.layer_norm_epsilon,
            kernel_initializer=bert_kernel_initializer(generator.initializer_range),
            dtype=generator.dtype_policy,
            name="mlm_logits",
        )
        self.rtd_dense = keras.layers.Dense(
            discriminator.hidden_dim,
            activation=discriminator.activation,
            kernel_initializer=bert_kernel_initializer(discriminator.initializer_range),
            dtype=discriminator.dtype_policy,
            name="rtd_dense",
        )
        self.rtd_output = keras.layers.Dense(
            1,
            kernel_initializer=bert_kernel_initializer(discriminator.initializer_range),
            dtype="float32",
            name="rtd_logits",
        )
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.trackers = {
            name: keras.metrics.Mean(name=name)
            for name in ("mlm_loss", "rtd_loss", "mlm_accuracy", "rtd_accuracy", "replaced")
        }
        self.trackers.update(diagnostics.diagnostic_metrics(frequent=frequent_ids is not None))
        self.frequent_mask = (
            None
            if frequent_ids is None
            else diagnostics.frequent_piece_mask(frequent_ids, discriminator.vocabulary_size)
        )
        self.unigram_log_probs = None
        if unigram_generator:  # the control's distribution, saved with the weights
            self.unigram_log_probs = self.add_weight(
                shape=(discriminator.vocabulary_size,),
                initializer="zeros",
                trainable=False,
                name="unigram_log_probs",
            )
            if unigram_counts is not None:
                counts = np.asarray(unigram_counts, "float64") + 1e-3
                self.unigram_log_probs.assign(np.log(counts / counts.sum()).astype("float32"))
        # Training steps taken: the warm-up and ramp of the replaced-token weight.
        self.steps_taken = self.add_weight(
            shape=(),
            initializer="zeros",
            dtype="int32",
            trainable=False,
            aggregation="only_first_replica",
            name="steps_taken",
        )

        # Every variable exists from the start (a trainer builds its optimizer and
        # restores checkpoints before the first batch).
        self.masked_lm_head.build((None, None, generator.hidden_dim), (None, None))
        self.rtd_dense.build((None, None, discriminator.hidden_dim))
        self.rtd_output.build((None, None, discriminator.hidden_dim))
        self.built = True

        # === Config ===
        self.rtd_weight = rtd_weight
        self.temperature = temperature
        self.seed = seed
        self.generator_warmup_steps = generator_warmup_steps
        self.rtd_ramp_steps = rtd_ramp_steps
        self.uniform_generator = bool(uniform_generator)
        self.uniform_warmup_steps = uniform_warmup_steps
        self.unigram_generator = bool(unigram_generator)
        self.frequent_ids = frequent_ids

    def generator_logits(self, inputs, training=False):
        """The generator's masked-LM logits at `inputs["masked_positions"]`."""
        features = {name: inputs[name] for name in BACKBONE_INPUTS}
        sequence = self.generator(features, training=training)["sequence_output"]
        return self.masked_lm_head(sequence, inputs["masked_positions"])

    def discriminator_logits(self, inputs, training=False):
        """`(batch, length)` float32 logits of "replaced" for every token of `inputs`
        (`token_ids`, `segment_ids`, `padding_mask`)."""
        features = {name: inputs[name] for name in BACKBONE_INPUTS}
        sequence = self.discriminator(features, training=training)["sequence_output"]
        return ops.squeeze(self.rtd_output(self.rtd_dense(sequence)), -1)

    def replacements(self, mlm_logits, shape):
        """The ids written at the masked positions (`shape`): samples of the generator's
        softmax (`mlm_logits`, no gradient), or the controls' draws
        (`uniform_generator`: uniform; `unigram_generator`: the corpus's piece
        frequencies), uniform draws instead during `uniform_warmup_steps`."""
        vocabulary, seed = ops.shape(mlm_logits)[-1], self.seed_generator
        if self.uniform_generator:
            return keras.random.randint(shape, 0, vocabulary, seed=seed, dtype="int32")
        logits = ops.reshape(ops.stop_gradient(mlm_logits), (-1, vocabulary))
        if self.unigram_generator:
            logits = ops.zeros_like(logits) + self.unigram_log_probs
        else:
            logits = logits / self.temperature
        sampled = ops.reshape(keras.random.categorical(logits, 1, seed=seed, dtype="int32"), shape)
        if self.uniform_warmup_steps:  # the curriculum's easy replacements first
            uniform = keras.random.randint(shape, 0, vocabulary, seed=seed, dtype="int32")
            early = ops.cast(self.steps_taken, "int32") <= self.uniform_warmup_steps
            sampled = ops.where(early, uniform, sampled)
        return sampled

    def call(self, inputs, training=None):
        if training:
            self.steps_taken.assign_add(1)
        mlm_logits = self.generator_logits(inputs, training=training)
        sampled = self.replacements(mlm_logits, ops.shape(inputs["masked_positions"]))
        token_ids = ops.cast(inputs["token_ids"], "int32")
        # (batch, predictions, length): where each real prediction goes.
        placed = ops.one_hot(
            ops.cast(inputs["masked_positions"], "int32"), ops.shape(token_ids)[1]
        ) * ops.expand_dims(ops.cast(inputs["masked_weights"], "float32"), -1)
        masked = ops.max(placed, axis=1) > 0

        def scatter(values):
            values = ops.expand_dims(ops.cast(values, "float32"), -1)
            return ops.where(masked, ops.cast(ops.sum(placed * values, axis=1), "int32"), token_ids)

        original, corrupted = scatter(inputs["masked_ids"]), scatter(sampled)
        corrupted = ops.stop_gradient(corrupted)
        rtd_logits = self.discriminator_logits(
            {**inputs, "token_ids": corrupted}, training=training
        )
        return {
            "mlm_logits": mlm_logits,
            "rtd_logits": rtd_logits,
            "rtd_labels": ops.cast(ops.not_equal(corrupted, original), "int32"),
            "corrupted_ids": corrupted,
        }

    def compile(self, optimizer="adam", **kwargs):
        """The losses and metrics are the model's own; `compile` takes the optimizer
        (Adam by default, as `BertPretrainer`) and Keras's other arguments."""
        super().compile(optimizer=optimizer, **kwargs)

    def _objectives(self, x, y_pred):
        weights = ops.cast(x["masked_weights"], "float32")
        real = ops.cast(x["padding_mask"], "float32")
        mlm = keras.losses.sparse_categorical_crossentropy(
            x["masked_ids"], y_pred["mlm_logits"], from_logits=True
        )
        rtd = keras.losses.binary_crossentropy(
            ops.expand_dims(ops.cast(y_pred["rtd_labels"], "float32"), -1),
            ops.expand_dims(y_pred["rtd_logits"], -1),
            from_logits=True,
        )
        mlm_loss = ops.sum(mlm * weights) / ops.maximum(ops.sum(weights), 1.0)
        rtd_loss = ops.sum(rtd * real) / ops.maximum(ops.sum(real), 1.0)
        return mlm_loss, rtd_loss

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """`MLM + rtd_weight * RTD` from the inputs and outputs alone (`y` is unused:
        the targets are in `x`)."""
        mlm_loss, rtd_loss = self._objectives(x, y_pred)
        # Kept for `compute_metrics`, which the trainers call next on the same `y_pred`.
        self._step_objectives = (y_pred, (mlm_loss, rtd_loss))
        weight = self.rtd_weight * (self.rtd_schedule() if training else 1.0)
        loss = mlm_loss + weight * rtd_loss
        if training and self.losses:  # regularisers, as Keras adds them
            loss = loss + ops.sum(ops.stack(self.losses))
        return loss

    def rtd_schedule(self):
        """The share of `rtd_weight` that the replaced-token loss gets at this step
        (counted in `steps_taken`, this step included): 0 for the generator's
        warm-up steps, then rising linearly over `rtd_ramp_steps` to 1."""
        if not (self.generator_warmup_steps or self.rtd_ramp_steps):
            return 1.0
        past = ops.cast(self.steps_taken, "float32") - float(self.generator_warmup_steps)
        return ops.clip(past / float(max(self.rtd_ramp_steps, 1)), 0.0, 1.0)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        step_pred, objectives = getattr(self, "_step_objectives", (None, None))
        if step_pred is not y_pred:  # not this step's loss (e.g. JAX's separate traces)
            objectives = self._objectives(x, y_pred)
        mlm_loss, rtd_loss = objectives
        weights = ops.cast(x["masked_weights"], "float32")
        real = ops.cast(x["padding_mask"], "float32")
        predicted = ops.argmax(y_pred["mlm_logits"], axis=-1)
        mlm_hits = ops.cast(
            ops.equal(predicted, ops.cast(x["masked_ids"], predicted.dtype)), "float32"
        )
        labels = ops.cast(y_pred["rtd_labels"], "float32")
        rtd_hits = ops.cast(
            ops.equal(ops.cast(y_pred["rtd_logits"] > 0, "float32"), labels), "float32"
        )
        self.trackers["mlm_loss"].update_state(mlm_loss)
        self.trackers["rtd_loss"].update_state(rtd_loss)
        self.trackers["mlm_accuracy"].update_state(mlm_hits, sample_weight=weights)
        self.trackers["rtd_accuracy"].update_state(rtd_hits, sample_weight=real)
        self.trackers["replaced"].update_state(labels, sample_weight=real)
        diagnostics.update_diagnostics(
            self.trackers,
            y_pred["rtd_logits"],
            labels,
            real,
            y_pred["corrupted_ids"],
            self.frequent_mask,
        )
        return super().compute_metrics(x, y, y_pred, sample_weight)

    def training_flops(self, sequence_length, predictions):
        """FLOPs of one training example, the generator's included (as the paper
        counts them): `pretraining_flops.electra_training_flops`."""
        from keras_attn.models.bert.pretraining_flops import electra_training_flops

        return electra_training_flops(self, sequence_length, predictions)

    @property
    def trainable_weights(self):
        # Neither objective reads a pooler: they are left out of training.
        return without_poolers(super().trainable_weights, self.generator, self.discriminator)

    @property
    def trainable_variables(self):  # what the trainers and the optimizer's build read
        return self.trainable_weights

    @classmethod
    def from_pretrained(cls, generator_path, discriminator_path, **kwargs):
        """Loads a Hugging Face ELECTRA: an `ElectraForMaskedLM` generator folder and an
        `ElectraForPreTraining` discriminator folder (e.g. google/electra-small-generator
        and -discriminator), backbones and heads.

        The two must hold the same embeddings (ELECTRA trains one shared set; a
        `ValueError` names any that differ) and the generator's output layer must be
        its word embeddings (tied).

        Args:
            generator_path: the generator's checkpoint folder.
            discriminator_path: the discriminator's checkpoint folder.
            **kwargs: `ElectraPretrainer` arguments (`rtd_weight`, `seed`).

        Returns:
            An `ElectraPretrainer` whose `generator_logits` and `discriminator_logits`
            equal the two Hugging Face models' logits.
        """
        from keras_attn.models.bert import electra_checkpoint

        return electra_checkpoint.load_pretrainer(cls, generator_path, discriminator_path, **kwargs)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "generator": keras.saving.serialize_keras_object(self.generator),
            "discriminator": keras.saving.serialize_keras_object(self.discriminator),
            "rtd_weight": self.rtd_weight,
            "temperature": self.temperature,
            "seed": self.seed,
            "generator_warmup_steps": self.generator_warmup_steps,
            "rtd_ramp_steps": self.rtd_ramp_steps,
            "uniform_generator": self.uniform_generator,
            "uniform_warmup_steps": self.uniform_warmup_steps,
            "unigram_generator": self.unigram_generator,
            "frequent_ids": self.frequent_ids,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for name in ("generator", "discriminator"):
            config[name] = keras.saving.deserialize_keras_object(config[name])
        return cls(**config)
