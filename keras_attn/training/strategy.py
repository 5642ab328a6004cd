"""Choosing how a run spreads over the machine it finds itself on: a `tf.distribute`
strategy on TensorFlow, `keras.distribution` (`DataParallel`, `ModelParallel`) on JAX."""

import contextlib
import json
import os
import sys

import keras
import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import UserInputError
from keras_attn.training.checkpoints import host_array
from keras_attn.training.config import ConfigError

STRATEGY_NAMES = ("auto", "default", "mirrored", "multi_worker", "tpu", "parameter_server")


def _cluster():
    """The `cluster` of `TF_CONFIG` (empty if unset); a clear error if it is not JSON."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return {}, {}
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"Expected TF_CONFIG to be JSON. Received: {raw!r} ({error})") from None
    return config.get("cluster", {}), config.get("task", {})


def _tpu_name():
    """A TPU to connect to: `TPU_NAME`, Colab's address, or a TPU VM's local chips."""
    for variable in ("TPU_NAME", "COLAB_TPU_ADDR"):
        if os.environ.get(variable):
            return os.environ[variable]
    if os.path.exists("/dev/accel0") or os.path.exists("/dev/vfio/0"):  # TPU VM devices
        return "local"
    return None


@keras_attn_export("keras_attn.training.resolve_strategy")
def resolve_strategy(name="auto", peer_timeout=120):
    """The `tf.distribute.Strategy` for `name`, created once, before any model.

    `"auto"` picks, in order: a TPU (`TPU_NAME`, `COLAB_TPU_ADDR` or a TPU VM) →
    `MultiWorkerMirroredStrategy` when `TF_CONFIG` names more than one worker →
    `MirroredStrategy` when there is more than one GPU → the default strategy.
    `"mirrored"` mirrors over all GPUs, or, on a machine without GPUs, over all
    logical CPU devices (split the CPU with `tf.config.set_logical_device_configuration`
    to check replica code on a laptop). `"multi_worker"` needs `TF_CONFIG`; a worker
    whose peers have not all registered within `peer_timeout` seconds fails with a
    `RuntimeError` saying so, instead of waiting forever (see
    `keras_attn/training/multi_worker.py`, which also carries the workaround that
    lets Keras 3's `fit` run multi-worker). `"parameter_server"` needs
    `ps` tasks in `TF_CONFIG`.

    Args:
        name: one of `"auto"`, `"default"`, `"mirrored"`, `"multi_worker"`,
            `"tpu"`, `"parameter_server"`.
        peer_timeout: seconds a multi-worker start waits for every worker to register.

    Returns:
        A `tf.distribute.Strategy`.

    Example:

    >>> from keras_attn.training import resolve_strategy
    >>> resolve_strategy("default").num_replicas_in_sync
    1
    >>> resolve_strategy("mirrorred")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Expected `strategy` in ('auto', 'default', ...). Received: strategy='mirrorred'
    """
    if name not in STRATEGY_NAMES:
        raise ValueError(f"Expected `strategy` in {STRATEGY_NAMES}. Received: strategy={name!r}")
    cluster, _ = _cluster()
    if name == "auto":
        if _tpu_name():
            name = "tpu"
        elif len(cluster.get("worker", [])) + len(cluster.get("chief", [])) > 1:
            name = "multi_worker"
        elif len(tf.config.list_physical_devices("GPU")) > 1:
            name = "mirrored"
        else:
            name = "default"
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker":
        if not cluster.get("worker"):
            raise ValueError(
                "strategy='multi_worker' needs TF_CONFIG with a cluster of workers, e.g. "
                '{"cluster": {"worker": ["host1:port", "host2:port"]}, '
                '"task": {"type": "worker", "index": 0}}'
            )
        from keras_attn.training.multi_worker import multi_worker_strategy

        return multi_worker_strategy(register_timeout=peer_timeout)
    if name == "tpu":
        tpu = _tpu_name()
        if tpu is None:
            raise ValueError("strategy='tpu' found no TPU: set TPU_NAME (or run on a TPU VM)")
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    # parameter_server
    if not cluster.get("ps"):
        raise ValueError(
            "strategy='parameter_server' needs TF_CONFIG with 'ps' tasks in its cluster"
        )
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return tf.distribute.experimental.ParameterServerStrategy(resolver)


class KerasDistribution:
    """`keras.distribution` on JAX, with what `train` uses of a `tf.distribute.Strategy`:
    `num_replicas_in_sync` (the data-parallel replicas), `scope()`, and `shard()`.

    `scope()` makes the distribution Keras's global one for as long as it is open:
    `DataParallel` over the devices (variables replicated on every device; `fit` splits
    each global batch over them along its first axis and all-reduces the gradients, as
    `MirroredStrategy` does), until `shard(structure)` replaces it with `ModelParallel`
    on a `(batch, model)` mesh of `(devices / model_parallel, model_parallel)` devices,
    whose layout map the model's `get_layout_map` gives. With one device nothing is
    distributed. The devices are every process's (`jax.devices()`): a run of several
    processes (`keras.distribution.initialize`) trains on all of them, each process
    feeding its share of every batch.
    """

    def __init__(self, devices=None, model_parallel=1):
        import jax

        self.devices = list(devices) if devices is not None else jax.devices()
        if model_parallel < 1 or len(self.devices) % model_parallel:
            raise ConfigError(
                "training.model_parallel",
                f"a divisor of the {len(self.devices)} devices, got {model_parallel}",
            )
        self.model_parallel = model_parallel
        self.num_replicas_in_sync = len(self.devices) // model_parallel
        self.num_processes = jax.process_count()
        self.is_chief = jax.process_index() == 0
        # Keras splits each batch over the batch axis (and the processes): whole ones only.
        self.splits_batches = self.num_replicas_in_sync > 1 or self.num_processes > 1
        self._distribution = None  # DataParallel once a scope opens, ModelParallel once sharded

    @property
    def device_mesh(self):
        """The `(batch, model)` `DeviceMesh` of the devices."""
        shape = (self.num_replicas_in_sync, self.model_parallel)
        return keras.distribution.DeviceMesh(shape, ["batch", "model"], self.devices)

    @contextlib.contextmanager
    def scope(self):
        if len(self.devices) == 1:
            yield
            return
        if self._distribution is None:
            self._distribution = keras.distribution.DataParallel(devices=self.devices)
        with self._distribution.scope():
            yield

    def shard(self, structure):
        """Within `scope()`: the variables created from now on are split as
        `structure.get_layout_map` says (a model built by `model_structure`), in this
        scope and any entered again; nothing changes when `model_parallel` is 1."""
        if self.model_parallel == 1:
            return
        layouts = structure.get_layout_map(self.device_mesh)
        self._distribution = keras.distribution.ModelParallel(
            layout_map=layouts, batch_dim_name="batch"
        )
        keras.distribution.set_distribution(self._distribution)


@keras_attn_export("keras_attn.training.resolve_data_parallel")
def resolve_data_parallel(name="auto", model_parallel=1):
    """The JAX counterpart of `resolve_strategy`: a `KerasDistribution` for `name`.

    `"auto"` and `"mirrored"` spread each batch over every JAX device (GPUs, TPU cores,
    the host devices `XLA_FLAGS=--xla_force_host_platform_device_count=N` makes of a
    CPU, and every process's devices in a multi-process run); `"default"` trains on the
    first device alone. `model_parallel` > 1 splits the weights over that many devices
    of each data-parallel replica (see `KerasDistribution.shard`). The multi-host
    strategies are TensorFlow's: asked for on JAX, they raise a `ValueError` naming what
    to use instead.

    Args:
        name: `"auto"`, `"default"` or `"mirrored"` (`"tpu"` on a machine whose JAX
            devices are TPU cores).
        model_parallel: devices per model replica (a divisor of the device count).

    Returns:
        A `KerasDistribution`, whose `scope()` the trainer holds open for the whole run.

    Example:

    >>> from keras_attn.training import resolve_data_parallel
    >>> resolve_data_parallel("default").num_replicas_in_sync
    1
    >>> resolve_data_parallel("multi_worker")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: strategy='multi_worker' is TensorFlow's ...
    """
    import jax

    if name not in STRATEGY_NAMES:
        raise ValueError(f"Expected `strategy` in {STRATEGY_NAMES}. Received: strategy={name!r}")
    devices = jax.devices()
    if name == "tpu" and devices[0].platform != "tpu":
        raise ValueError("strategy='tpu' found no TPU among JAX's devices")
    if name in ("multi_worker", "parameter_server"):
        raise ValueError(
            f"strategy={name!r} is TensorFlow's (TF_CONFIG clusters); on the JAX backend use "
            "'auto' or 'mirrored' (data parallel over the devices) or 'default' "
            "(one device), or run with KERAS_BACKEND=tensorflow"
        )
    return KerasDistribution(devices[:1] if name == "default" else devices, model_parallel)


def initialize_processes(coordinator, num_processes, process_id, timeout=120):
    """Joins a JAX run of `num_processes` processes (`jax.distributed.initialize`, which
    `keras.distribution.initialize` calls), before JAX starts: each process then sees
    every process's devices, and `resolve_data_parallel` spans them all.

    Args:
        coordinator: `"HOST:PORT"` where process 0 listens (on that address alone,
            not on every interface) and the others connect.
        num_processes: how many processes the run has.
        process_id: this process's index, 0 to `num_processes - 1` (0 is the chief).
        timeout: seconds to wait for every process to connect.

    Raises:
        UserInputError: a process that did not connect in time, or a coordinator
            that cannot be reached or served.
    """
    import threading

    import jax

    message = (
        f"process {process_id} of {num_processes} could not join the run at {coordinator} "
        f"within {timeout} s"
    )
    advice = (
        "start every process with the same --coordinator and --num-processes, each with its "
        "own --process-id"
    )

    def give_up():
        # JAX ends a process whose peers never registered with a C++ abort (a stack trace,
        # no Python exception): this watchdog ends it first, with the one error line.
        print(f"error: {message}; {advice}", file=sys.stderr, flush=True)
        os._exit(2)

    watchdog = threading.Timer(timeout, give_up)
    watchdog.daemon = True
    watchdog.start()
    try:
        jax.distributed.initialize(
            coordinator,
            num_processes,
            process_id,
            initialization_timeout=timeout + 60,
            # Process 0 serves where the user said (JAX's default: every interface).
            coordinator_bind_address=coordinator,
        )
    except (RuntimeError, ValueError) as error:  # jax's runtime errors are RuntimeErrors
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserInputError(f"{message} ({detail}); {advice}") from None
    finally:
        watchdog.cancel()


@contextlib.contextmanager
def undistributed(active=True):
    """Keras's distribution off while open (when `active`): models made here live in
    this process alone."""
    previous = keras.distribution.distribution()
    if active:
        keras.distribution.set_distribution(None)
    try:
        yield
    finally:
        keras.distribution.set_distribution(previous)


def local_copy(model):
    """`model` rebuilt in this process alone with the weights of every process's shards
    (see `checkpoints.host_array`)."""
    weights = [host_array(w.value) for w in model.weights]
    with undistributed():
        copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model))
        copy.set_weights(weights)
    return copy


def is_chief(strategy):
    """Whether this process writes checkpoints, logs and exports (worker 0 / the chief)."""
    if isinstance(strategy, KerasDistribution):
        return strategy.is_chief
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(strategy.extended, "_in_multi_worker_mode", lambda: False)():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type == "chief" or (
        task_type == "worker" and task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()
    )
