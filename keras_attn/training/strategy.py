"""Choosing a `tf.distribute` strategy for the machine a run finds itself on."""

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


def is_chief(strategy):
    """Whether this process writes checkpoints, logs and exports (worker 0 / the chief)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(strategy.extended, "_in_multi_worker_mode", lambda: False)():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type == "chief" or (
        task_type == "worker" and task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()
    )
