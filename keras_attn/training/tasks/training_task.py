"""`TrainingTask`: what the trainer asks of a recipe, with the defaults most recipes share."""

import keras


class TrainingTask:
    """The base of the recipes behind `keras-attn pretrain` / `finetune` / `lm` / `seq2seq`.

    `keras_attn.training.train` takes any object with these methods; a subclass
    writes `sections`, `prepare`, `build_model` and `save`, and inherits the rest.

    Attributes:
        sections: `{section name: config dataclass}` of the task's own configuration.
        monitor: `(metric, "min" | "max")` that picks `best.npz`, or `None`.
        evaluate_first: whether the trainer validates before the first step (a task
            that starts from trained weights), reported as `before_val_*`.
    """

    sections = {}
    monitor = ("val_loss", "min")
    evaluate_first = False

    def prepare(self, run):
        """Reads the data of `run` -> `TrainingData`."""
        raise NotImplementedError(f"{type(self).__name__}.prepare")

    def build_model(self, run):
        """The model to compile (called in the strategy's scope)."""
        raise NotImplementedError(f"{type(self).__name__}.build_model")

    def compile(self, model, optimizer, run):
        """Compiles with the model's own loss and metrics (`training.jit_compile`; always
        compiled on JAX, whose uncompiled steps run op by op)."""
        jit_compile = run.training.jit_compile or keras.backend.backend() == "jax"
        model.compile(optimizer=optimizer, jit_compile=jit_compile)

    def identity(self):
        """What `prepare` learned from the data that a resumed run must share
        (a label set, a vocabulary hash); nothing by default."""
        return {}

    def probe(self):
        """`(backbone, inputs, tokens)` for the attention images, or `None`."""
        return None

    def save(self, model, output_dir):
        """Writes the task's artefacts (`model.keras`, vocabulary, labels)."""
        raise NotImplementedError(f"{type(self).__name__}.save")
