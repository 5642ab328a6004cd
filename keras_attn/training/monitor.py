"""TensorBoard beyond Keras's callback: rates, throughput, attention maps, hyper-parameters.

Keras's `TensorBoard` callback writes the epoch losses and metrics (train and
validation) and the profiler trace. These callbacks add what a person watching a
Transformer train wants next to them, all indexed by the optimizer's step (so a
resumed run continues the same curves): `TrainingMonitor` (learning rate, tokens/s,
step time and the running losses every N steps), `WeightHistograms` (every weight's
histogram every N epochs), `AttentionImages` (a fixed probe sentence's attention per layer and head,
as images), `TextSamples` (generated text) and `write_hparams` (the run's
configuration for the HParams plugin).
"""

import time

import keras
import numpy as np
import tensorflow as tf

from keras_attn.api_export import keras_attn_export


class _SummaryCallback(keras.callbacks.Callback):
    """A callback writing to `log_dir/<folder>` (its writer made at the first write), at
    the optimizer's step."""

    def __init__(self, log_dir, folder):
        super().__init__()
        self.log_dir, self.folder = str(log_dir), folder
        self.writer = None

    def _writer(self):
        self.writer = self.writer or tf.summary.create_file_writer(f"{self.log_dir}/{self.folder}")
        return self.writer

    def _step(self):
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))


class _EveryNSteps(_SummaryCallback):
    """Writes to `log_dir/<folder>` every `every` optimizer steps (and, with
    `at_end`, once more at the end of training unless its last step was written);
    a subclass implements `write(step, logs)`."""

    at_end = True

    def __init__(self, log_dir, folder, every):
        super().__init__(log_dir, folder)
        self.every = every

    def on_train_batch_end(self, batch, logs=None):
        step = self._step()
        if self.every and step % self.every == 0:
            self.write(step, logs)

    def on_train_end(self, logs=None):
        step = self._step()
        if self.at_end and (not self.every or step % self.every):
            self.write(step)
        if self.writer is not None:
            self.writer.flush()


@keras_attn_export("keras_attn.training.TrainingMonitor", serializable=False)
class TrainingMonitor(_EveryNSteps):
    """Every `every` steps: `learning_rate`, `tokens_per_second`, `step_time_ms` and the
    running training logs (`loss`, metrics) as scalars in `log_dir/train`.

    Args:
        log_dir: the run's TensorBoard directory (scalars go to `log_dir/train`).
        tokens_per_step: tokens in one global batch (batch x sequence length).
        every: steps between writes.

    Call arguments:
        None: a Keras callback; pass it to `fit(callbacks=[...])`.

    Example:

    >>> import tempfile, keras, numpy as np
    >>> from keras_attn.training import TrainingMonitor
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("adam", "mse")
    >>> _ = model.fit(np.ones((8, 2)), np.ones(8), batch_size=2, verbose=0,
    ...               callbacks=[TrainingMonitor(tempfile.mkdtemp(), tokens_per_step=2, every=2)])
    """

    at_end = False  # the running values of the last step are Keras's epoch logs

    def __init__(self, log_dir, tokens_per_step, every=10):
        super().__init__(log_dir, "train", every)
        self.tokens_per_step = tokens_per_step

    def on_train_begin(self, logs=None):
        self._mark = (time.perf_counter(), self._step())

    def write(self, step, logs=None):
        """Writes the rates since the last write and the running `logs` at `step`."""
        now = time.perf_counter()
        elapsed, steps = now - self._mark[0], step - self._mark[1]
        self._mark = (now, step)
        optimizer = self.model.optimizer
        rate = optimizer.learning_rate
        with self._writer().as_default(step=step):
            tf.summary.scalar("learning_rate", float(keras.ops.convert_to_numpy(rate)))
            if steps > 0:
                tf.summary.scalar("step_time_ms", 1000.0 * elapsed / steps)
                tf.summary.scalar("tokens_per_second", self.tokens_per_step * steps / elapsed)
            for name, value in (logs or {}).items():
                if np.ndim(value) == 0:
                    tf.summary.scalar(f"running_{name}", float(value))
        self.writer.flush()


@keras_attn_export("keras_attn.training.WeightHistograms", serializable=False)
class WeightHistograms(_SummaryCallback):
    """Every `every` epochs, a histogram of each of the model's weights in
    `log_dir/train`, tagged `<weight path>/histogram` (Keras's tags), at the
    optimizer's step.

    Keras's `TensorBoard(histogram_freq=...)` draws them with TensorFlow's histogram
    ops, run eagerly one weight at a time: about 3.5 s an epoch for MiniLM's 100
    weights on a 2-core CPU, longer than a short epoch's training. Here NumPy counts
    each weight into TensorBoard's 30 equal buckets between its minimum and maximum
    (the layout of `tensorboard`'s own `histogram_pb`; MiniLM's whole set in about a
    second) and all of them are written as one summary, on any backend.

    Args:
        log_dir: the run's TensorBoard directory (histograms go to `log_dir/train`).
        every: epochs between histograms (the last epoch of every `every`).
        buckets: buckets per histogram.

    Call arguments:
        None: a Keras callback; pass it to `fit(callbacks=[...])`.

    Example:

    >>> import tempfile, keras, numpy as np
    >>> from keras_attn.training import WeightHistograms
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> histograms = WeightHistograms(tempfile.mkdtemp())
    >>> _ = model.fit(np.ones((4, 2)), np.ones(4), epochs=2, verbose=0, callbacks=[histograms])
    >>> sorted(histograms.buckets_of(model))
    ['sequential/dense/bias/histogram', 'sequential/dense/kernel/histogram']
    """

    def __init__(self, log_dir, every=1, buckets=30):
        super().__init__(log_dir, "train")
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"Expected `every` an int >= 1. Received: every={every!r}")
        if not isinstance(buckets, int) or buckets < 1:
            raise ValueError(f"Expected `buckets` an int >= 1. Received: buckets={buckets!r}")
        self.every, self.buckets = every, buckets

    def buckets_of(self, model):
        """`{tag: (buckets, 3) float64}`: each weight's `[left, right, count]` rows."""
        found = {}
        for weight in model.weights:
            values = np.asarray(keras.ops.convert_to_numpy(weight.value), np.float64).ravel()
            found[f"{weight.path.replace(':', '_')}/histogram"] = self._histogram(values)
        return found

    def _histogram(self, values):
        """`[left, right, count]` rows of the finite values (a diverged run's NaN and
        infinite weights are left out, not a crash at the epoch's end)."""
        rows = np.zeros((self.buckets, 3))
        values = values[np.isfinite(values)]
        if values.size == 0:
            return rows
        low, high = float(values.min()), float(values.max())
        if low == high:  # one value: every bucket at it, the count in the last
            rows[:, :2], rows[-1, 2] = low, values.size
            return rows
        counts, edges = np.histogram(values, bins=self.buckets, range=(low, high))
        rows[:, 0], rows[:, 1], rows[:, 2] = edges[:-1], edges[1:], counts
        return rows

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.every:
            return
        from tensorboard.compat.proto import summary_pb2
        from tensorboard.plugins.histogram import metadata
        from tensorboard.util import tensor_util

        summary = summary_pb2.Summary()
        for tag, rows in self.buckets_of(self.model).items():
            summary.value.add(
                tag=tag,
                metadata=metadata.create_summary_metadata(display_name=None, description=None),
                tensor=tensor_util.make_tensor_proto(rows, dtype=np.float64),
            )
        with self._writer().as_default():
            tf.summary.experimental.write_raw_pb(summary.SerializeToString(), step=self._step())
        self.writer.flush()


@keras_attn_export("keras_attn.training.AttentionImages", serializable=False)
class AttentionImages(_EveryNSteps):
    """Every `every` steps, draws the attention of a fixed probe input, one image per
    layer (heads side by side, tokens on both axes), into `log_dir/attention`.

    People would rather look at attention than read it: a freshly initialised model
    attends almost uniformly; watch the heads pick positions (the previous token,
    `[SEP]`, the token itself) as training goes on.

    Args:
        log_dir: the run's TensorBoard directory.
        backbone: the model with `attention_maps(inputs)` (e.g. `BertBackbone`).
        inputs: the probe, a dict of arrays with a batch of 1.
        tokens: the probe's token strings (its real, unpadded tokens).
        every: steps between images; one more at the end of training.

    Call arguments:
        None: a Keras callback; pass it to `fit(callbacks=[...])`.

    Example:

    >>> import tempfile, keras, numpy as np
    >>> from keras_attn.models import BertBackbone
    >>> from keras_attn.training import AttentionImages
    >>> backbone = BertBackbone.from_size("tiny", vocabulary_size=10)
    >>> probe = {"token_ids": np.array([[2, 5, 6, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...          "padding_mask": np.ones((1, 4), "int32")}
    >>> images = AttentionImages(tempfile.mkdtemp(), backbone, probe, ["[CLS]", "a", "b", "[SEP]"])
    >>> images.write(step=0)
    2
    """

    def __init__(self, log_dir, backbone, inputs, tokens, every=100):
        super().__init__(log_dir, "attention", every)
        length = int(np.sum(inputs["padding_mask"][0]))
        if len(tokens) != length:
            raise ValueError(
                f"Expected one token string per real probe token ({length}). "
                f"Received: {len(tokens)} tokens"
            )
        self.backbone, self.inputs, self.tokens = backbone, inputs, list(tokens)

    def write(self, step, logs=None):
        """Writes one image per layer at `step`; returns the number of layers drawn."""
        from keras_attn.visualize import attention_image_summary

        n = len(self.tokens)
        maps = self.backbone.attention_maps(self.inputs)
        with self._writer().as_default(step=step):
            for layer, scores in enumerate(maps):
                scores = keras.ops.convert_to_numpy(scores)[0, :, :n, :n]  # (heads, n, n)
                attention_image_summary(
                    f"layer_{layer}", scores, self.tokens, title=f"layer {layer}, step {step}"
                )
        self.writer.flush()
        return len(maps)

    def on_train_begin(self, logs=None):
        self.write(self._step())


@keras_attn_export("keras_attn.training.TextSamples", serializable=False)
class TextSamples(_EveryNSteps):
    """Every `every` steps (and at the end), writes text the model generates as a
    TensorBoard text summary in `log_dir/samples`: how a language model or a
    translator is doing reads better than its loss.

    Args:
        log_dir: the run's TensorBoard directory.
        generate: `() -> list of (input text, generated text)`, e.g. prompts
            continued by `model.generate` and detokenised.
        every: steps between samples; one more at the end of training.

    Call arguments:
        None: a Keras callback; pass it to `fit(callbacks=[...])`.

    Example:

    >>> import tempfile
    >>> from keras_attn.training import TextSamples
    >>> def generate():  # (prompt, generated text) pairs
    ...     return [("in the beginning", "in the beginning god")]
    >>> samples = TextSamples(tempfile.mkdtemp(), generate)
    >>> print(samples.write(step=0))
    | input | generated |
    | --- | --- |
    | in the beginning | in the beginning god |
    """

    def __init__(self, log_dir, generate, every=100):
        super().__init__(log_dir, "samples", every)
        self.generate = generate

    def write(self, step, logs=None):
        """Writes one table of samples at `step`; returns its markdown."""
        rows = ["| input | generated |", "| --- | --- |"]
        for given, generated in self.generate():
            rows.append(f"| {_cell(given)} | {_cell(generated)} |")
        table = "\n".join(rows)
        with self._writer().as_default(step=step):
            tf.summary.text("samples", table)
        self.writer.flush()
        return table


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


@keras_attn_export("keras_attn.training.write_hparams")
def write_hparams(log_dir, config, metrics=()):
    """Records a run's configuration for TensorBoard's HParams dashboard.

    Args:
        log_dir: the run's TensorBoard directory.
        config: nested dict of settings (sections flattened to `section.key`;
            values that are not numbers, strings or booleans are written as text).
        metrics: metric tags to show as HParams columns (e.g. `"epoch_loss"`).

    Example:

    >>> import tempfile
    >>> from keras_attn.training import write_hparams
    >>> write_hparams(tempfile.mkdtemp(), {"training": {"batch_size": 32, "clipnorm": None}})
    {'training.batch_size': 32, 'training.clipnorm': 'None'}
    """
    from tensorboard.plugins.hparams import api as hp

    flat = {}
    for section, values in config.items():
        for key, value in values.items() if isinstance(values, dict) else [("", values)]:
            name = f"{section}.{key}" if key else section
            flat[name] = value if isinstance(value, (bool, int, float, str)) else str(value)
    writer = tf.summary.create_file_writer(str(log_dir))
    with writer.as_default():
        hp.hparams_config(
            hparams=[hp.HParam(name) for name in flat], metrics=[hp.Metric(tag) for tag in metrics]
        )
        hp.hparams(flat)
    writer.flush()
    return flat
