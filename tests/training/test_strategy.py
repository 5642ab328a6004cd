"""Strategies: resolution, and MirroredStrategy over 2 logical CPUs = the default strategy."""

import json
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from keras_attn.training import resolve_strategy
from tests.training.runs import ROOT, environment, pretrain_args, write_corpus


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


def test_tf_config_that_is_not_json_is_named(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{workers: 2")
    with pytest.raises(ValueError, match="TF_CONFIG to be JSON"):
        resolve_strategy("auto")


def _run(tmp_path, strategy, cpus, **flags):
    prefix = tmp_path / strategy
    args = pretrain_args(tmp_path / "corpus.txt", tmp_path / strategy, strategy=strategy, **flags)
    process = subprocess.run(
        [sys.executable, "-m", "tests.training.strategy_run", str(cpus), str(prefix), *args],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    return json.loads(prefix.with_suffix(".json").read_text())[
        "history"
    ], process.stdout + process.stderr


@pytest.mark.slow
def test_mirrored_over_two_logical_cpus_matches_the_default_strategy(tmp_path):
    write_corpus(tmp_path / "corpus.txt")
    # No dropout: each replica draws its own dropout masks, so only a deterministic model can agree.
    flags = dict(steps=30, steps_per_epoch=10, dropout=0.0, batch_size=8)
    default, _ = _run(tmp_path, "default", 2, **flags)
    mirrored, _ = _run(tmp_path, "mirrored", 2, **flags)
    for key in ("loss", "mlm_logits_loss", "nsp_logits_loss", "val_loss"):
        np.testing.assert_allclose(mirrored[key], default[key], rtol=1e-4, err_msg=key)


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


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _workers(tmp_path, indices, num_workers, timeout, **flags):
    """Starts the given worker indices of a `num_workers` cluster on 127.0.0.1 through the CLI."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(num_workers)]}
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
def test_multi_worker_over_loopback_trains_to_identical_weights(tmp_path):
    write_corpus(tmp_path / "corpus.txt")
    flags = dict(steps=20, steps_per_epoch=10, dropout=0.0, batch_size=8)
    outputs = _workers(tmp_path, [0, 1], 2, timeout=400, **flags)
    for index, (output, code) in outputs.items():
        assert code == 0, (index, output[-3000:])
    with np.load(tmp_path / "worker0.npz") as a, np.load(tmp_path / "worker1.npz") as b:
        assert len(a.files) > 10
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key])
    # One process, same global batch: the same losses.
    single, _ = _run(tmp_path, "default", 1, **flags)
    worker = json.loads((tmp_path / "worker0.json").read_text())["history"]
    np.testing.assert_allclose(worker["loss"], single["loss"], rtol=1e-4)
    assert (tmp_path / "run" / "model.keras").exists()  # the chief saved the model


@pytest.mark.slow
def test_a_worker_without_its_peer_fails_in_bounded_time(tmp_path):
    write_corpus(tmp_path / "corpus.txt")
    start = time.time()
    outputs = _workers(tmp_path, [0], 2, timeout=150, peer_timeout=10)
    output, code = outputs[0]
    assert code != 0
    assert "not every worker" in output and "registered within 10 s" in output, output[-3000:]
    assert time.time() - start < 120
