"""Choosing how a run spreads over the machine it finds itself on: a `tf.distribute`
strategy on TensorFlow, `keras.distribution.DataParallel` on JAX."""

import contextlib
import json
import os

import tensorflow as tf

from keras_attn.api_export import keras_attn_export

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


class KerasDataParallel:
    """Data parallelism through `keras.distribution` (JAX), with what `train` uses of a
    `tf.distribute.Strategy`: `num_replicas_in_sync`, `scope()`.

    `scope()` makes the distribution Keras's global one for as long as it is open: the
    variables are created replicated on every device, and `fit` splits each global
    batch over the devices along its first axis and all-reduces the gradients, as
    `MirroredStrategy` does. With one device (`devices=None` on a one-device machine,
    or `--strategy default`) nothing is distributed.
    """

    def __init__(self, devices=None):
        import jax

        self.devices = list(devices) if devices is not None else jax.devices()
        self.num_replicas_in_sync = len(self.devices)
        self.is_chief = jax.process_index() == 0

    @contextlib.contextmanager
    def scope(self):
        if self.num_replicas_in_sync == 1:
            yield
            return
        import keras

        distribution = keras.distribution.DataParallel(devices=self.devices)
        with distribution.scope():
            yield


@keras_attn_export("keras_attn.training.resolve_data_parallel")
def resolve_data_parallel(name="auto"):
    """The JAX counterpart of `resolve_strategy`: a `KerasDataParallel` for `name`.

    `"auto"` and `"mirrored"` spread each batch over every local JAX device (GPUs,
    TPU cores, or the host devices `XLA_FLAGS=--xla_force_host_platform_device_count=N`
    makes of a CPU); `"default"` trains on the first device alone. The multi-host
    strategies are TensorFlow's: asked for on JAX, they raise a `ValueError` naming
    what to use instead.

    Args:
        name: `"auto"`, `"default"` or `"mirrored"` (`"tpu"` on a machine whose JAX
            devices are TPU cores).

    Returns:
        A `KerasDataParallel`, whose `scope()` the trainer holds open for the whole run.

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
    devices = jax.local_devices()
    if name == "tpu" and devices[0].platform != "tpu":
        raise ValueError("strategy='tpu' found no TPU among JAX's devices")
    if name in ("multi_worker", "parameter_server"):
        raise ValueError(
            f"strategy={name!r} is TensorFlow's (TF_CONFIG clusters); on the JAX backend use "
            "'auto' or 'mirrored' (data parallel over this host's devices) or 'default' "
            "(one device), or run with KERAS_BACKEND=tensorflow"
        )
    return KerasDataParallel(devices[:1] if name == "default" else devices)


def is_chief(strategy):
    """Whether this process writes checkpoints, logs and exports (worker 0 / the chief)."""
    if isinstance(strategy, KerasDataParallel):
        return strategy.is_chief
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(strategy.extended, "_in_multi_worker_mode", lambda: False)():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type == "chief" or (
        task_type == "worker" and task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()
    )
