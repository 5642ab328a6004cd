"""Shared set-up of the training tests: a small generated corpus and CLI runs."""

import json
import os
import pathlib
import random
import socket
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The tests that start processes which then wait on each other (8 host devices, or two
# workers or processes and a coordinator): on one xdist worker, so two never run at once.
# Run together on a 2-core CI machine, a TensorFlow worker missed its peer's heartbeats
# and a JAX process its 600 s deadline.
MULTI_PROCESS = pytest.mark.xdist_group("multi_process")

WORDS = "the a king land river stone light dark sea city gold word went came saw gave".split()
VOCABULARY = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "good",
    "great",
    "fine",
    "bad",
    "awful",
    "poor",
    "the",
    "film",
    "was",
    "plot",
    "very",
    ".",
]


def backbone_folder(path):
    """A tiny backbone saved as `keras-attn convert` / `pretrain` leave one (16 positions)."""
    from keras_attn.models import BertBackbone

    path.mkdir()
    BertBackbone.from_size(
        "tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=16, initializer_range=0.1
    ).save(path / "backbone.keras")
    (path / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    return path


def write_reviews(path, count=240, seed=0, labels=("pos", "neg"), bad_row=True):
    """Reviews whose label is the sentiment word (`labels`: positive, negative name); one
    bad row (empty text) the reader must report."""
    import csv

    rng = random.Random(seed)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["review", "sentiment"])
        for _ in range(count):
            positive = rng.choice(["pos", "neg"]) == "pos"
            word = rng.choice(["good", "great", "fine"] if positive else ["bad", "awful", "poor"])
            filler = rng.sample(["the", "film", "was", "plot", "very"], 3)
            words = filler[: rng.randint(0, 3)] + [word] + filler[rng.randint(0, 3) :]
            writer.writerow([" ".join(words) + " .", labels[0] if positive else labels[1]])
        if bad_row:
            writer.writerow(["", labels[0]])  # empty text: reported, left out
    return path


def write_corpus(path, documents=40, sentences=8, seed=0):
    """Documents of random sentences, in `pretrain`'s text format (blank line between documents)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(documents):
        lines += [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))) + "."
            for _ in range(sentences)
        ]
        lines.append("")
    pathlib.Path(path).write_text("\n".join(lines), encoding="utf-8")
    return path


def pretrain_args(corpus, output, **overrides):
    """`keras-attn pretrain` flags for a run of a few seconds on `corpus`."""
    flags = dict(
        corpus=corpus,
        vocabulary_size=200,
        held_out_documents=4,
        sequence_length=32,
        batch_size=8,
        steps=45,
        steps_per_epoch=15,
        checkpoint_every=10,
        validation_steps=2,
        attention_every=0,
        histogram_every=0,
        dropout=0.1,
        verbose=0,
    )
    flags.update(overrides)
    args = ["pretrain", "--output", str(output)]
    for key, value in flags.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def free_ports(count=1):
    """`count` ports of 127.0.0.1 free now (held together while chosen, so distinct)."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def environment(**extra):
    env = dict(
        os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow", PYTHONPATH=str(ROOT)
    )
    env.update(extra)
    return env


def keras_attn_command(args, **popen):
    return subprocess.Popen(
        [sys.executable, "-m", "keras_attn.cli.main", *args],
        cwd=ROOT,
        env=popen.pop("env", environment()),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **popen,
    )


def run_keras_attn(args):
    """`keras-attn ARGS` run in this process (a TensorFlow start saved); what it printed.

    Its stdout, stderr and `keras_attn`'s warnings (what a terminal shows) are captured;
    exiting with an error fails the test with them. `keras_attn_command` runs the
    command in a process of its own, for what needs one (signals, exit codes)."""
    import contextlib
    import io
    import logging

    import keras

    from keras_attn.cli.main import main

    printed = io.StringIO()
    handler = logging.StreamHandler(printed)
    handler.setLevel(logging.WARNING)
    logger = logging.getLogger("keras_attn")
    logger.addHandler(handler)
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            main([str(arg) for arg in args])
    except SystemExit as stopped:
        raise AssertionError(
            f"keras-attn {args[0]} exited with {stopped.code}:\n{printed.getvalue()[-3000:]}"
        ) from None
    finally:
        logger.removeHandler(handler)
        keras.config.set_dtype_policy("float32")  # as a fresh process would find it
    return printed.getvalue()


def final_weights(output):
    """The weights of `output/model.keras`, as a list of arrays."""
    import keras

    import keras_attn.models  # noqa: F401  (registers our classes for loading)

    model = keras.saving.load_model(pathlib.Path(output) / "model.keras", compile=False)
    return model.get_weights()


def read_json(path):
    return json.loads(pathlib.Path(path).read_text())


FINETUNE_FLAGS = {
    "model.sequence_length": 16,
    "data.text_column": "review",
    "data.label_column": "sentiment",
    "training.batch_size": 8,
    "training.steps_per_epoch": 2,
    "training.attention_every": 0,
    "training.histogram_every": 0,
    "training.validation_steps": 1,
    "training.steps": 2,
}


def finetune_in_process(backbone, train_file, output, resume=True, **overrides):
    """A few steps of `keras-attn finetune` on `write_reviews` data, without a subprocess."""
    from keras_attn.training import TrainingConfig, load_config, train
    from keras_attn.training.tasks import TextClassificationTask

    task = TextClassificationTask()
    run = load_config(
        {**task.sections, "training": TrainingConfig},
        overrides={
            **FINETUNE_FLAGS,
            "model.backbone": str(backbone),
            "data.train": str(train_file),
            **overrides,
        },
    )
    return train(task, run, output, resume=resume, verbose=0)


# A few steps of pre-training on a small corpus: what each objective's test starts from
# (`{**PRETRAIN_FLAGS, "model.objective": ..., "data.corpus": ...}`).
PRETRAIN_FLAGS = {
    "model.sequence_length": 32,
    "data.vocabulary_size": 200,
    "data.held_out_documents": 4,
    "training.batch_size": 8,
    "training.steps": 4,
    "training.steps_per_epoch": 2,
    "training.checkpoint_every": 2,
    "training.validation_steps": 1,
    "training.attention_every": 0,
    "training.histogram_every": 0,
    "training.jit_compile": False,
}


def train_task(task, output, flags):
    """`(task, result)`: `task` (a `TrainingTask`) trained into `output` with `flags`
    over its defaults, quietly, as its command would."""
    from keras_attn.training import TrainingConfig, load_config, train

    run = load_config({**task.sections, "training": TrainingConfig}, overrides=flags)
    return task, train(task, run, output, verbose=0)
