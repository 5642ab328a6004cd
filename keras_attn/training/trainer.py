"""One training loop for every task: strategy, precision, resumable data, checkpoints, logs."""

import contextlib
import dataclasses
import json
import logging
import math
import pathlib
import time

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.atomic_files import replaced_on_success
from keras_attn.data import fixed_batches, step_batches
from keras_attn.models import model_structure
from keras_attn.training import checkpoints as checkpoint_lib
from keras_attn.training import run_folder
from keras_attn.training.config import ConfigError, to_dict
from keras_attn.training.monitor import (
    AttentionImages,
    TextSamples,
    TrainingMonitor,
    WeightHistograms,
    write_hparams,
)
from keras_attn.training.optimizer import build_optimizer
from keras_attn.training.progress import RunProgress, heartbeat
from keras_attn.training.strategy import (
    is_chief,
    local_copy,
    resolve_data_parallel,
    resolve_strategy,
    undistributed,
)

logger = logging.getLogger("keras_attn.training")


@keras_attn_export("keras_attn.training.TrainingData", serializable=False)
@dataclasses.dataclass
class TrainingData:
    """What a task hands `train`: examples by index, so batches can start at any step.

    Args:
        num_examples: training examples in one epoch.
        example_fn: `(index, seed) -> (x, y[, sample_weight])` for one example
            (see `keras_attn.data.step_batches`).
        validation_examples: held-out examples (0: no validation).
        validation_fn: the same for the held-out examples.
        tokens_per_example: sequence length (for tokens/s).
        batched: `example_fn`/`validation_fn` make a whole batch from a vector of
            indices (`step_batches(..., batched=True)`).

    Call arguments:
        None: a plain record.

    Example:

    >>> from keras_attn.training import TrainingData
    >>> TrainingData(100, lambda index, seed: (index, index)).validation_examples
    0
    """

    num_examples: int
    example_fn: object
    validation_examples: int = 0
    validation_fn: object = None
    tokens_per_example: int = 1
    batched: bool = False


@dataclasses.dataclass
class TrainingResult:
    """What a finished run reports: final metrics and where everything went."""

    model: object
    history: dict
    metrics: dict
    steps: int
    resumed_from: int
    output_dir: pathlib.Path
    seconds: float

    def summary(self):
        lines = [
            f"Trained {self.steps} steps in {self.seconds / 60:.1f} min"
            + (f" (resumed at step {self.resumed_from})" if self.resumed_from else "")
            + ", reading the data, validating and saving included."
        ]
        for name, value in sorted(self.metrics.items()):
            lines.append(f"  {name:<28} {value:.4f}")
        out = self.output_dir
        lines += [
            f"Model:        {out / 'model.keras'}",
            f"Checkpoints:  {out / 'checkpoints'}",
            f"TensorBoard:  tensorboard --logdir {out / 'logs'} --host 127.0.0.1",
        ]
        return "\n".join(lines)


@keras_attn_export("keras_attn.training.train", serializable=False)
def train(task, run, output_dir, resume=True, verbose="auto"):
    """Trains `task` as `run` says, into `output_dir`; resumes from its checkpoints.

    The order matters and is fixed here: the strategy first (multi-worker
    collectives must exist before other TensorFlow work), then the precision policy
    and seeds, the data (indexed examples, see `TrainingData`), then model,
    optimizer and metrics inside `strategy.scope()`, then the newest checkpoint, if
    any, and `fit` from that step. `output_dir` receives `config.yaml`,
    `identity.json`, `checkpoints/`, `logs/` (TensorBoard) and, at the end, the
    task's artefacts (`model.keras`, vocabulary, labels). On the JAX backend the
    strategy is `resolve_data_parallel`'s (`keras.distribution.DataParallel` over the
    devices, or `ModelParallel` with `training.model_parallel` > 1: the layout map is
    read off the task's model built first as a `model_structure`), held open for the
    whole run; other backends are refused. In a JAX run of several processes
    (`strategy.initialize_processes`) every process trains on its share of each batch,
    the chief writes, and the callbacks that compute on the model (histograms,
    attention images, samples) are off.

    A folder belongs to one run (see `keras_attn.training.run_folder`): resuming a
    folder whose recorded configuration or task identity differs in anything but
    the step budget and logging raises a `ValueError` naming the differing keys,
    before anything is loaded or written; with `resume=False` the earlier run's
    folder is first moved to `<output_dir>.replaced-<time>`.

    Args:
        task: an object with `prepare(run) -> TrainingData`, `build_model(run)`
            (called in the strategy scope, returns the model to compile),
            `compile(model, optimizer, run)`, `monitor` (`(metric, "min"|"max")` or
            `None`), `probe()` (`(backbone, inputs, tokens)` for attention images,
            or `None`), `save(model, output_dir)`, and optionally `samples()`
            (`[(input, generated text)]` for `TextSamples`) and `identity()` (a
            dict of what `prepare` learned from the data that a resumed run must
            share: a label set, a vocabulary hash).
        run: the configuration from `load_config` (a `training` section and the
            task's own).
        output_dir: the run's folder.
        resume: continue from the newest checkpoint in `output_dir/checkpoints`
            (`False`: start afresh, moving an earlier run aside).
        verbose: progress on stdout (`RunProgress`): `0` none; `1` a bar over the
            run's steps; `2` plain lines (the first step, every 30 s, each epoch's
            metrics); `"auto"`: a bar on a terminal, lines otherwise. Unless `0`,
            a line at least once a minute while anything runs (`heartbeat`).

    Returns:
        A `TrainingResult` (`model`, `history`, final validation `metrics`,
        `steps`, `resumed_from`, `summary()`).

    Example:

    >>> import tempfile, keras, tensorflow as tf
    >>> from keras_attn.training import TrainingConfig, TrainingData, load_config, train
    >>> class MeanTask:  # learns y = mean(x)
    ...     sections, monitor = {}, None
    ...     def prepare(self, run):
    ...         x = tf.random.stateless_uniform((64, 4), seed=[0, 0])
    ...         return TrainingData(64, lambda i, seed: (x[i], tf.reduce_mean(x[i])))
    ...     def build_model(self, run):
    ...         return keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    ...     def compile(self, model, optimizer, run):
    ...         model.compile(optimizer, "mse")
    ...     def probe(self):
    ...         return None
    ...     def save(self, model, output_dir):
    ...         model.save(output_dir / "model.keras")
    >>> run = load_config({"training": TrainingConfig}, overrides={
    ...     "training.steps": 20, "training.batch_size": 8, "training.attention_every": 0})
    >>> result = train(MeanTask(), run, tempfile.mkdtemp(), verbose=0)
    >>> result.steps, result.resumed_from
    (20, 0)
    """
    config = run.training
    if verbose not in ("auto", 0, 1, 2):
        raise ValueError(f"Expected `verbose` 0, 1, 2 or 'auto'. Received: verbose={verbose!r}")
    output_dir = pathlib.Path(output_dir)
    run_folder.check_output_dir(output_dir)
    run_folder.check_same_run(output_dir, to_dict(run), resume=resume)  # before anything slow
    if keras.backend.backend() == "jax":
        strategy = resolve_data_parallel(config.strategy, config.model_parallel)
        with strategy.scope():  # open for `fit` too: Keras splits every batch in it
            return _train(task, run, output_dir, resume, verbose, strategy)
    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            f"`train` runs on the TensorFlow and JAX backends; KERAS_BACKEND is "
            f"{keras.backend.backend()!r}"
        )
    if config.model_parallel != 1:
        raise ConfigError(
            "training.model_parallel",
            "1 on the TensorFlow backend (weights are split by keras.distribution on JAX: "
            "--backend jax)",
        )
    strategy = resolve_strategy(config.strategy, peer_timeout=config.peer_timeout)
    return _train(task, run, output_dir, resume, verbose, strategy)


def _train(task, run, output_dir, resume, verbose, strategy):
    config = run.training
    replicas = strategy.num_replicas_in_sync
    if config.batch_size % replicas:
        raise ConfigError(
            "training.batch_size",
            f"a multiple of the {replicas} replicas of the '{config.strategy}' strategy, "
            f"got {config.batch_size}",
        )
    chief = is_chief(strategy)
    processes = getattr(strategy, "num_processes", 1)  # JAX processes (TF: workers train alone)
    progress = None
    if verbose != 0 and chief:
        progress = RunProgress(config.steps, bar={1: True, 2: False}.get(verbose))
    with heartbeat(lambda: progress.stage) if progress else contextlib.nullcontext():
        return _train_with(task, run, output_dir, resume, strategy, chief, processes, progress)


def _train_with(task, run, output_dir, resume, strategy, chief, processes, progress):
    config, start, recorded = run.training, time.time(), to_dict(run)
    keras.config.set_dtype_policy(config.precision)
    keras.utils.set_random_seed(config.seed)
    data = task.prepare(run)
    identity = task.identity() if hasattr(task, "identity") else {}
    run_folder.check_same_run(output_dir, recorded, identity, resume=resume)  # labels, vocabulary

    if config.model_parallel > 1:  # JAX: the layout map is read off the model's structure
        strategy.shard(model_structure(lambda: task.build_model(run)))
    with strategy.scope():
        model = task.build_model(run)
        _enable_lora(model, config)
        optimizer = build_optimizer(config, hidden_dim=getattr(model, "hidden_dim", None))
        task.compile(model, optimizer, run)
        _build_training_state(model)
    checkpoint_dir = output_dir / "checkpoints"
    start_step = checkpoint_lib.restore_latest(model, checkpoint_dir) if resume else 0
    unsaved = start_step == config.steps and _unsaved(output_dir, checkpoint_dir, start_step)
    if unsaved:  # trained to the end, stopped before its model was saved: save it now
        logger.warning(
            "%s holds all %d steps but no saved model: saving it", checkpoint_dir, start_step
        )
    elif start_step >= config.steps:
        raise ConfigError(
            "training.steps",
            f"more than the {start_step} steps already done in "
            f"{checkpoint_dir} (--no-resume starts afresh, moving that run aside)",
        )
    if chief:
        moved = run_folder.claim(output_dir, recorded, identity, resume=resume)
        if moved:
            logger.warning(
                "Started afresh in %s; the run that was there is now in %s", output_dir, moved
            )
        write_hparams(output_dir / "logs", recorded, metrics=["epoch_loss"])

    callbacks = _callbacks(task, model, config, output_dir, data, chief, processes)
    callbacks += [progress] if progress else []
    validation = None
    if data.validation_examples:
        validation = fixed_batches(
            data.validation_examples,
            data.validation_fn,
            config.batch_size,
            seed=config.seed + 1,
            batched=data.batched,
            # keras.distribution splits whole batches only: the last, partial one is left out
            drop_remainder=getattr(strategy, "splits_batches", False),
        )

    before = _metrics_before(task, model, validation, config, output_dir, start_step, chief)

    def batches(step):
        return step_batches(
            data.num_examples,
            data.example_fn,
            config.batch_size,
            seed=config.seed,
            start_step=step,
            batched=data.batched,
        )

    spe = config.steps_per_epoch
    epochs = math.ceil(config.steps / spe)
    epoch, offset = divmod(start_step, spe)
    history = {}
    fit = dict(
        validation_data=validation,
        validation_steps=config.validation_steps,
        callbacks=callbacks,
        shuffle=False,
        verbose=0,  # RunProgress counts the run's steps, not an epoch's
    )
    if offset and not unsaved:  # finish the interrupted epoch: later ones end where they would
        steps = min(spe, config.steps - epoch * spe) - offset
        _merge(
            history,
            model.fit(
                batches(start_step),
                initial_epoch=epoch,
                epochs=epoch + 1,
                steps_per_epoch=steps,
                **fit,
            ),
        )
        epoch += 1
    if epoch < epochs and not unsaved:
        _merge(
            history,
            model.fit(
                batches(epoch * spe), initial_epoch=epoch, epochs=epochs, steps_per_epoch=spe, **fit
            ),
        )
    metrics = {}
    if validation is not None:
        metrics = {
            f"val_{k}": float(v)
            for k, v in model.evaluate(
                validation, steps=config.validation_steps, return_dict=True, verbose=0
            ).items()
        }
    metrics.update(before)
    saved = model
    if processes > 1:  # arrays may span the processes: every one helps put them together
        saved = local_copy(model)
    if chief:
        with undistributed(processes > 1):  # the chief alone: no array may span processes
            task.save(saved, output_dir)
            if config.lora_rank:
                saved.save_lora_weights(output_dir / "adapters.lora.h5")
        (output_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    done = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    return TrainingResult(
        model, history, metrics, done, start_step, output_dir, time.time() - start
    )


BEFORE = "metrics_before.json"


def _unsaved(output_dir, checkpoint_dir, step):
    """Whether the run's checkpoint of `step` is newer than its `metrics.json` (written
    last, after the model): stopped between its last step and its save."""
    metrics = output_dir / "metrics.json"
    if not metrics.is_file():
        return True
    paths = [path for found, path in checkpoint_lib.checkpoints(checkpoint_dir) if found == step]
    return bool(paths) and paths[-1].stat().st_mtime > metrics.stat().st_mtime


def _metrics_before(task, model, validation, config, output_dir, start_step, chief):
    """`{"before_val_<metric>": value}`: the validation metrics before the first step,
    for a task that starts from trained weights (`task.evaluate_first`: a base decoder),
    kept in `metrics_before.json` so a resumed run reports them too; `{}` otherwise."""
    if not getattr(task, "evaluate_first", False) or validation is None:
        return {}
    path = output_dir / BEFORE
    if start_step:
        return json.loads(path.read_text()) if path.is_file() else {}
    before = {
        f"before_val_{name}": float(value)
        for name, value in model.evaluate(
            validation, steps=config.validation_steps, return_dict=True, verbose=0
        ).items()
    }
    if chief:
        with replaced_on_success(path) as partial:
            partial.write_text(json.dumps(before, indent=2))
    logger.info("Before training: %s", before)
    return before


def _enable_lora(model, config):
    """`training.lora_rank`: LoRA adapters in `model`, the rest frozen."""
    if not config.lora_rank:
        return
    if not hasattr(model, "enable_lora"):
        raise ConfigError(
            "training.lora_rank", f"null for this task: {type(model).__name__} takes no LoRA"
        )
    targets = [name.strip() for name in config.lora_targets.split(",") if name.strip()]
    from keras_attn.models.lora import LoRARankError

    try:
        model.enable_lora(config.lora_rank, targets)
    except LoRARankError as error:
        raise ConfigError("training.lora_rank", f"a rank the model can use ({error})") from None
    except ValueError as error:
        raise ConfigError("training.lora_targets", f"projections of the model ({error})") from None


def _build_training_state(model):
    """Creates the optimizer's variables now, so a checkpoint can be loaded into them."""
    if not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)


class _StopAtStep(keras.callbacks.Callback):
    """Ends training at exactly `steps` optimizer steps (the last epoch may be short)."""

    def __init__(self, steps):
        super().__init__()
        self.steps = steps

    def on_train_batch_end(self, batch, logs=None):
        if int(keras.ops.convert_to_numpy(self.model.optimizer.iterations)) >= self.steps:
            self.model.stop_training = True


def _callbacks(task, model, config, output_dir, data, chief, processes=1):
    monitor = task.monitor
    callbacks = [
        _StopAtStep(config.steps),
        checkpoint_lib.RunCheckpoint(
            output_dir / "checkpoints",
            every=config.checkpoint_every,
            keep=config.keep_checkpoints,
            monitor=monitor[0] if monitor and data.validation_examples else None,
            mode=monitor[1] if monitor else "min",
            is_chief=chief,
            gather_everywhere=processes > 1,
        ),
    ]
    if not chief:  # every worker trains; one writes the logs
        return callbacks
    logs = output_dir / "logs"
    if processes > 1:  # one process computing on arrays that span all of them would wait
        logger.warning(
            "%d processes: weight histograms, attention images and samples are off", processes
        )
    histograms = 0 if processes > 1 else config.histogram_every
    profile = tuple(int(s) for s in config.profile_steps.split(",")) if config.profile_steps else 0
    callbacks += [
        keras.callbacks.TensorBoard(str(logs), write_graph=False, profile_batch=profile),
        TrainingMonitor(
            logs,
            tokens_per_step=config.batch_size * data.tokens_per_example,
            every=max(1, min(config.checkpoint_every, config.steps_per_epoch) // 10),
        ),
    ]
    if histograms:
        callbacks.append(WeightHistograms(logs, every=histograms))
    probe = task.probe() if config.attention_every and processes == 1 else None
    if probe is not None:
        backbone, inputs, tokens = probe
        callbacks.append(
            AttentionImages(logs, backbone, inputs, tokens, every=config.attention_every)
        )
    samples = getattr(task, "samples", None)
    if samples is not None and config.samples_every and processes == 1:
        callbacks.append(TextSamples(logs, samples, every=config.samples_every))
    return callbacks


def _merge(history, fitted):
    for key, values in fitted.history.items():
        history.setdefault(key, []).extend(values)
