"""Weights split over devices with `keras.distribution.ModelParallel` on JAX, on the host
devices `XLA_FLAGS=--xla_force_host_platform_device_count=N` makes of the CPU (each run
in a process of its own: the count is read when JAX starts):

- every family's task model on a 2 x 4 mesh predicts and trains 5 steps as on one
  device, its kernels and tables split on the model axis;
- `keras-attn pretrain|finetune|lm|seq2seq --backend jax --model-parallel N` (and 1:
  data parallel alone), a run resumed on another mesh equal to one run on one device;
- two processes (`--coordinator`, `--num-processes`, `--process-id`) on a free port of
  localhost train 20 steps as one device does;
- the flags' mistakes, each one `error:` line.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.training.runs import (
    MULTI_PROCESS,
    ROOT,
    backbone_folder,
    environment,
    final_weights,
    free_ports,
    pretrain_args,
    write_corpus,
    write_reviews,
)


def _jax_environment(devices):
    # The test process's XLA flags (conftest.py: compiles about twice as fast); these
    # small models do not run long enough to miss what they leave out.
    flags = f"--xla_force_host_platform_device_count={devices} {os.environ['XLA_FLAGS']}"
    return environment(XLA_FLAGS=flags, KERAS_BACKEND="jax")


def _run(args, devices, timeout=600):
    """Runs `python ARGS` on `devices` host devices; the JSON its last line prints."""
    process = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=_jax_environment(devices),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    last = process.stdout.strip().splitlines()[-1]
    return json.loads(last) if last.startswith("{") else last


@pytest.mark.slow
@MULTI_PROCESS
def test_every_family_on_a_2_by_4_mesh_equals_one_device():
    found = _run(["-m", "tests.training.model_parallel_run"], devices=8)
    assert found["devices"] == 8
    assert set(found["families"]) == {
        "bert", "roberta", "deberta", "xlnet", "gpt", "transformer_xl", "seq2seq", "elmo"
    }  # fmt: skip
    for name, family in found["families"].items():
        assert family["predictions"] <= 1e-5 and family["weights"] <= 1e-5, (name, family)
        # ELMo: its embedding, four projections and softmax (the LSTM cells stay whole).
        assert family["split"] >= (6 if name == "elmo" else 14), name
        assert family["split"] == family["in_layout_map"], name
        assert family["not_on_model_axis"] == [], name


# `keras-attn ... --backend jax` runs in one JAX process of 8 host devices; for each, the
# mesh its kernels were made on and which of the kernels and tables were not split.
CLI_RUNS = """
import json, sys
import keras
from keras_attn.cli.main import main
from keras_attn.models.layout_maps import REPLICATED, sharding_roles
runs = {}
for name, args in json.loads(sys.argv[1]):
    result = main(args)
    split = [v for v, role, _, _ in sharding_roles(result.model) if role != REPLICATED]
    layout = split[0]._layout  # what Keras made the variable with (None: one device)
    runs[name] = {
        "resumed_from": result.resumed_from,
        "steps": result.steps,
        "mesh": list(layout.device_mesh.shape) if layout is not None else [1, 1],
        # the shards the devices hold: a model-axis dimension cut into model-parallel parts
        "not_on_model_axis": [
            v.path for v in split
            if v._layout is None or "model" not in v._layout.axes
            or v.value.sharding.shard_shape(v.shape)[v._layout.axes.index("model")]
            * v._layout.device_mesh.shape[1] != v.shape[v._layout.axes.index("model")]
        ],
        "whole_on_each_device": all(
            v.value.sharding.shard_shape(v.shape) == tuple(v.shape)
            and len(v.value.sharding.device_set) == 8
            for v in split
        ),
    }
print(json.dumps(runs))
"""


def _lm_args(corpus, output):
    flags = dict(
        corpus=corpus, vocabulary_size=200, held_out_documents=4, num_layers=1, num_heads=4,
        hidden_dim=32, intermediate_dim=64, sequence_length=32, batch_size=8, steps=4,
        steps_per_epoch=2, samples_every=0, histogram_every=0, attention_every=0, verbose=0,
    )  # fmt: skip
    return ["lm", "--output", str(output)] + [
        item for key, value in flags.items() for item in (f"--{key.replace('_', '-')}", str(value))
    ]


@pytest.mark.slow
@MULTI_PROCESS
def test_cli_trains_every_kind_split_resumes_on_another_mesh_and_in_two_processes(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt")
    # A constant learning rate: a 10-step run then resumed to 20 sees what a 20-step run sees.
    same = dict(dropout=0.0, schedule="constant", warmup=0.0, checkpoint_every=10)
    same.update(steps_per_epoch=10, validation_steps=1)

    def pretrain(folder, steps, **flags):
        args = pretrain_args(corpus, tmp_path / folder, steps=steps, **same, **flags)
        return args + ["--backend", "jax"]

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"a b {i % 7}\tB A {i % 7}\n" for i in range(80)))
    backbone = backbone_folder(tmp_path / "backbone")
    reviews = write_reviews(tmp_path / "reviews.csv", count=40, bad_row=False)

    def finetune(folder, model_parallel):
        return [
            "finetune", "--backbone", str(backbone), "--train", str(reviews), "--output",
            str(tmp_path / folder), "--text-column", "review", "--label-column", "sentiment",
            "--sequence-length", "16", "--batch-size", "8", "--steps", "4",
            "--steps-per-epoch", "2", "--attention-every", "0", "--histogram-every", "0",
            "--verbose", "0", "--model-parallel", model_parallel, "--backend", "jax",
        ]  # fmt: skip

    runs = [
        ("one device", pretrain("single", 20, strategy="default")),
        ("2 x 4, 10 steps", pretrain("split", 10, model_parallel=4)),
        ("4 x 2, resumed", pretrain("split", 20, model_parallel=2)),
        ("finetune", finetune("finetune", "4")),
        ("finetune, data parallel", finetune("replicated", "1")),
        ("lm", _lm_args(corpus, tmp_path / "lm") + ["--model-parallel", "4", "--backend", "jax"]),
        (
            "seq2seq",
            ["seq2seq", "--pairs", str(pairs), "--held-out-sources", "2",
             "--source-vocabulary-size", "20", "--target-vocabulary-size", "20",
             "--num-layers", "1", "--hidden-dim", "32", "--intermediate-dim", "64",
             "--max-length", "8", "--batch-size", "8", "--steps", "4", "--steps-per-epoch", "2",
             "--samples-every", "0", "--histogram-every", "0", "--attention-every", "0",
             "--verbose", "0", "--output", str(tmp_path / "seq2seq"), "--model-parallel", "8",
             "--backend", "jax"],
        ),
    ]  # fmt: skip
    found = _run(["-c", CLI_RUNS, json.dumps(runs)], devices=8)
    meshes = {name: run["mesh"] for name, run in found.items()}
    assert meshes == {
        "one device": [1, 1], "2 x 4, 10 steps": [2, 4], "4 x 2, resumed": [4, 2],
        "finetune": [2, 4], "finetune, data parallel": [8], "lm": [2, 4], "seq2seq": [1, 8],
    }  # fmt: skip
    for name, run in found.items():
        if name not in ("one device", "finetune, data parallel"):
            assert run["not_on_model_axis"] == [], (name, run)
    # Data parallel: every weight whole on each of the 8 devices.
    assert found["finetune, data parallel"]["whole_on_each_device"]
    assert found["4 x 2, resumed"]["resumed_from"] == 10
    assert found["4 x 2, resumed"]["steps"] == 20
    # The checkpoint of the 2 x 4 mesh went on on 4 x 2 as one device would have.
    one = final_weights(tmp_path / "single")
    resumed = final_weights(tmp_path / "split")
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(one, resumed, strict=True)) < 1e-5

    # Two processes of 2 host devices each, the weights split over each process's two
    # (a 2 x 2 mesh), each feeding half of every batch: 20 steps as one device's.
    outputs = _two_processes(pretrain("shared", 20, model_parallel=2))
    assert all("Trained 20 steps" in output for output in outputs)
    assert "2 processes: weight histograms, attention images and samples are off" in outputs[0]
    two = final_weights(tmp_path / "shared")
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(one, two, strict=True)) < 1e-5
    written = sorted(p.name for p in (tmp_path / "shared" / "checkpoints").glob("*"))
    assert written == ["best.npz", "ckpt-00000010.npz", "ckpt-00000020.npz"]  # no stray files


def _two_processes(args):
    """`keras-attn ARGS` as two processes of 2 host devices each, on a free port; their
    outputs."""
    args = args + ["--coordinator", f"127.0.0.1:{free_ports()[0]}", "--num-processes", "2"]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "keras_attn.cli.main", *args, "--process-id", str(index)],
            cwd=ROOT,
            env=_jax_environment(2),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for index in (0, 1)
    ]
    deadline, outputs = time.monotonic() + 600, []  # a loaded 2-core machine: minutes
    try:
        for process in processes:
            remaining = max(1.0, deadline - time.monotonic())
            outputs.append(process.communicate(timeout=remaining)[0])
    except subprocess.TimeoutExpired:
        for process in processes:  # what each had printed when the deadline came
            process.kill()
        printed = [process.communicate()[0] for process in processes[len(outputs) :]]
        tails = [f"process {i}: ...{out[-1500:]}" for i, out in enumerate(outputs + printed)]
        pytest.fail("two processes past 600 s:\n" + "\n".join(tails))
    finally:
        for process in processes:
            process.kill()
    for process, output in zip(processes, outputs, strict=True):
        assert process.returncode == 0, output[-3000:]
    return outputs


@pytest.mark.slow
@MULTI_PROCESS
def test_a_process_without_its_peer_ends_in_one_error_line(tmp_path):
    """The coordinator whose peer never comes (a process with no coordinator alike)."""
    process_id, port = 0, free_ports()[0]
    write_corpus(tmp_path / "corpus.txt")
    args = pretrain_args(tmp_path / "corpus.txt", tmp_path / "run", steps=2, peer_timeout=4)
    args += ["--backend", "jax", "--coordinator", f"127.0.0.1:{port}"]
    args += ["--num-processes", "2", "--process-id", str(process_id)]
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_attn.cli.main", *args],
        cwd=ROOT,
        env=_jax_environment(1),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    listening = set()  # where the coordinator listens while it waits for its peer
    try:
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            listening |= _listening(port)
            time.sleep(0.05)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    last = stderr.strip().splitlines()[-1]
    assert process.returncode == 2, stderr[-3000:]
    assert last.startswith(f"error: process {process_id} of 2 could not join") and "4 s" in last
    assert not (tmp_path / "run").exists()
    # --coordinator 127.0.0.1:PORT: bound there alone, not on every interface (*:PORT).
    assert listening == {"127.0.0.1"}, listening


def _listening(port):
    """The local addresses with a TCP socket listening on `port` (Linux's /proc/net)."""
    import ipaddress

    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)  # 32-bit words in host (little-endian) order
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            ip = ipaddress.ip_address(words)
            found.add(str(ip.ipv4_mapped or ip) if ip.version == 6 else str(ip))
    return found


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--num-processes", "2"], "needs all of --coordinator"),
        (
            ["--coordinator", "localhost", "--num-processes", "2", "--process-id", "0"],
            "argument --coordinator: expected HOST:PORT, got 'localhost'",
        ),
        (
            ["--coordinator", "127.0.0.1:1", "--num-processes", "2", "--process-id", "2"],
            r"--process-id: expected 0 to 1 \(--num-processes 2\), got 2",
        ),
        (
            ["--coordinator", "127.0.0.1:1", "--num-processes", "2", "--process-id", "1"],
            "run on JAX: add --backend jax",
        ),
        (["--model-parallel", "2"], "`training.model_parallel`: expected 1 on the TensorFlow"),
        # JAX's coordinator ends process 0 with a segmentation fault where it cannot
        # listen: a mistyped address, one of another machine (TEST-NET-1: no traffic,
        # the bind fails here), a name that does not resolve.
        (
            ["--coordinator", "999.1.1.1:47612", "--num-processes", "2", "--process-id", "0"],
            "--coordinator: '999.1.1.1' is not an IPv4 address",
        ),
        (
            ["--coordinator", "192.0.2.1:47612", "--num-processes", "2", "--process-id", "0"],
            "process 0 serves the run at 192.0.2.1:47612, but cannot listen there",
        ),
        (
            [
                "--coordinator",
                "no_such.host.invalid:47612",
                "--num-processes",
                "2",
                "--process-id",
                "1",
            ],
            "--coordinator: cannot resolve the host 'no_such.host.invalid'",
        ),  # fmt: skip
    ],
)
def test_mistakes_are_one_error_line(tmp_path, capsys, flags, message):
    import re

    from keras_attn.cli.main import main

    write_corpus(tmp_path / "corpus.txt")
    args = pretrain_args(tmp_path / "corpus.txt", tmp_path / "run", steps=2) + flags
    with pytest.raises(SystemExit) as exit:
        main(args)
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit.value.code == 2 and re.search(message, error), error
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_coordinator_port_in_use_is_one_error_line(tmp_path, capsys):
    import socket

    from keras_attn.cli.main import main

    write_corpus(tmp_path / "corpus.txt")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = pretrain_args(tmp_path / "corpus.txt", tmp_path / "run", steps=2)
        args += ["--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", "0"]
        with pytest.raises(SystemExit) as exit:
            main(args)
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit.value.code == 2 and "cannot listen there" in error, error


def test_a_model_axis_that_does_not_divide_the_devices_is_named():
    import jax

    from keras_attn.training import resolve_data_parallel
    from keras_attn.training.config import ConfigError

    count = len(jax.devices())
    with pytest.raises(ConfigError, match=f"a divisor of the {count} devices, got {count + 1}"):
        resolve_data_parallel("auto", model_parallel=count + 1)
