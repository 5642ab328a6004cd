"""Strategies: resolution, and MirroredStrategy over 2 logical CPUs and two workers over
loopback = the default strategy. JAX's data and model parallelism, and its processes:
tests/training/test_model_parallel.py."""

import importlib.util
import json
import subprocess
import sys
import time

import pytest

from keras_attn.training import resolve_data_parallel, resolve_strategy
from tests.training.runs import (
    MULTI_PROCESS,
    ROOT,
    environment,
    free_ports,
    pretrain_args,
    write_corpus,
)


def test_auto_is_the_default_strategy_on_one_cpu(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.delenv("TPU_NAME", raising=False)
    assert resolve_strategy("auto").num_replicas_in_sync == 1


@pytest.mark.parametrize(
    "name, message",
    [("tpu", "TPU_NAME"), ("multi_worker", "TF_CONFIG"), ("parameter_server", "'ps'")],
)
def test_strategies_that_need_a_cluster_say_so(monkeypatch, name, message):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.delenv("TPU_NAME", raising=False)
    monkeypatch.delenv("COLAB_TPU_ADDR", raising=False)
    with pytest.raises(ValueError, match=message):
        resolve_strategy(name)


def test_jax_data_parallel_resolves_like_the_strategies():
    import jax

    assert resolve_data_parallel("default").num_replicas_in_sync == 1
    assert resolve_data_parallel("auto").num_replicas_in_sync == len(jax.local_devices())
    assert resolve_data_parallel("default").is_chief
    for name in ("multi_worker", "parameter_server"):
        with pytest.raises(ValueError, match="TensorFlow's"):
            resolve_data_parallel(name)
    with pytest.raises(ValueError, match="Expected `strategy`"):
        resolve_data_parallel("mirrorred")


def test_tf_config_that_is_not_json_is_named(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{workers: 2")
    with pytest.raises(ValueError, match="TF_CONFIG to be JSON"):
        resolve_strategy("auto")


@pytest.mark.slow
@MULTI_PROCESS
def test_mirrored_and_multi_worker_runs_match_the_default_strategy(tmp_path):
    """`examples/distributed_training.py`: `keras-attn pretrain` under the default strategy,
    MirroredStrategy over 2 logical CPUs and two workers over loopback, dropout off."""
    spec = importlib.util.spec_from_file_location(
        "distributed_training", ROOT / "examples" / "distributed_training.py"
    )
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    found = example.main(["--smoke", "--output", str(tmp_path)])
    assert found["workers_equal"]  # bit-identical weights on both workers
    # Every logged loss (MLM, NSP, validation) as one device computes it.
    assert found["mirrored_relative_loss_gap"] < 1e-4
    assert found["multi_worker_relative_loss_gap"] < 1e-4
    assert found["chief_model"]  # only the chief saves, and it did


@pytest.mark.slow
def test_batch_not_divisible_by_replicas_fails_before_training(tmp_path):
    write_corpus(tmp_path / "corpus.txt")
    args = pretrain_args(
        tmp_path / "corpus.txt", tmp_path / "run", strategy="mirrored", batch_size=7
    )
    process = subprocess.run(
        [sys.executable, "-m", "tests.training.strategy_run", "2", str(tmp_path / "h"), *args],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode != 0
    assert "training.batch_size" in process.stderr and "2 replicas" in process.stderr, (
        process.stderr[-2000:]
    )
    assert not (tmp_path / "run" / "checkpoints").exists()


def _workers(tmp_path, indices, num_workers, timeout, **flags):
    """Starts the given worker indices of a `num_workers` cluster on 127.0.0.1 through the CLI."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(num_workers)]}
    processes = {}
    for index in indices:
        env = environment(
            TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        )
        args = pretrain_args(
            tmp_path / "corpus.txt", tmp_path / "run", strategy="multi_worker", **flags
        )
        processes[index] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.training.strategy_run",
                "1",
                str(tmp_path / f"worker{index}"),
                *args,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    outputs = {}
    for index, process in processes.items():
        try:
            outputs[index] = (process.communicate(timeout=timeout)[0], process.returncode)
        except subprocess.TimeoutExpired:
            for other in processes.values():
                other.kill()
            raise
    return outputs


@pytest.mark.slow
@MULTI_PROCESS
def test_a_worker_without_its_peer_fails_in_bounded_time(tmp_path):
    write_corpus(tmp_path / "corpus.txt")
    start = time.time()
    outputs = _workers(tmp_path, [0], 2, timeout=150, peer_timeout=10)
    output, code = outputs[0]
    assert code != 0
    assert "not every worker" in output and "registered within 10 s" in output, output[-3000:]
    assert time.time() - start < 120
