"""Multi-worker training with Keras 3's `fit`: the one place that works around upstream.

Keras 3.15's `fit` fails under a multi-worker `MultiWorkerMirroredStrategy`
(keras-team/keras#20585, tensorflow/tensorflow#72388) in two places of
`keras/src/backend/tensorflow/trainer.py`:

1. `_maybe_symbolic_build` averages a whole input batch across workers with
   `strategy.reduce("MEAN", (x, y), axis=None)` just to learn its shapes; a tuple of
   `PerReplica` values is not something `reduce` takes across workers, hence
   `ValueError: Attempt to convert a value (PerReplica...)`. We build from this
   worker's first local batch instead: only shapes and dtypes matter there.
2. `reduce_per_replica` averages the step's logs with `reduce("MEAN", v, axis=0)`,
   which fails on the scalar losses and metrics ("Invalid reduction dimension 0").
   We average element-wise across replicas (`axis=None`), which is what the
   single-worker path computes.

Both replacements act only in multi-worker mode and defer to Keras otherwise.
Remove this module once upstream is fixed (check both issues on each Keras upgrade).

Also here: the coordination service is configured so that a worker whose peers
never come up fails within `register_timeout` seconds (TensorFlow's default waits
forever), and one whose peer dies mid-run fails after `heartbeat_timeout`.
"""

import json
import os

import tensorflow as tf

_PATCHED = False


def patch_keras_fit():
    """Installs the two replacements described above (idempotent)."""
    global _PATCHED
    if _PATCHED:
        return
    from keras.src import tree
    from keras.src.backend.tensorflow import trainer as tf_trainer

    multi_worker = tf_trainer._collective_all_reduce_multi_worker
    keras_build = tf_trainer.TensorFlowTrainer._maybe_symbolic_build
    keras_reduce = tf_trainer.reduce_per_replica

    def local(strategy, value):
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = self._distribute_strategy
        if strategy is None or not multi_worker(strategy):
            return keras_build(self, iterator=iterator, data_batch=data_batch)
        if iterator is not None:
            for _, _, batches in iterator:  # the first batch only: shapes and dtypes
                data_batch = tree.map_structure(lambda v: local(strategy, v), next(batches))
                break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and multi_worker(strategy):
            return tree.map_structure(lambda v: strategy.reduce("MEAN", v, axis=None), values)
        return keras_reduce(values, strategy, reduction)

    tf_trainer.TensorFlowTrainer._maybe_symbolic_build = _maybe_symbolic_build
    tf_trainer.reduce_per_replica = reduce_per_replica  # looked up when fit traces its step
    _PATCHED = True


def multi_worker_strategy(register_timeout=120, heartbeat_timeout=30, collective_timeout=None):
    """A `MultiWorkerMirroredStrategy` from `TF_CONFIG` that fails, not hangs, without peers.

    Must run before any other TensorFlow op of the process (collectives are set up
    at start-up).
    """
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.eager import context

    cluster = json.loads(os.environ["TF_CONFIG"])["cluster"]
    jobs = [
        coordination_config_pb2.CoordinatedJob(name=job, num_tasks=len(cluster[job]))
        for job in ("chief", "worker")
        if job in cluster
    ]
    leader = f"/job:{'chief' if 'chief' in cluster else 'worker'}/replica:0/task:0"
    ctx = context.context()
    ctx.configure_coordination_service(
        service_type="standalone",
        service_leader=leader,
        coordinated_jobs=jobs,
        cluster_register_timeout_in_ms=int(register_timeout * 1000),
        heartbeat_timeout_in_ms=int(heartbeat_timeout * 1000),
    )
    # Without a registration barrier the leader registers with itself and then waits
    # for its absent peers forever; with it, every task gives up after the timeout.
    # (A private field: TensorFlow has no public switch for it.)
    ctx._coordination_service_config.cluster_register_with_barrier = True
    patch_keras_fit()
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=collective_timeout)
    try:
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    except tf.errors.DeadlineExceededError as error:
        raise RuntimeError(
            "Multi-worker training could not start: not every worker of TF_CONFIG's cluster "
            f"{cluster} "
            f"registered within {register_timeout} s. Start all workers (same cluster, each its "
            "own "
            "task index) and check that their addresses are reachable. "
            f"({error.message.splitlines()[0]})"
        ) from None
