"""`keras-attn finetune --task tagging | span_qa` from CoNLL and SQuAD files."""

import json

import keras
import pytest
import tensorflow as tf

from keras_attn.models import BertBackbone
from tests.models.bert import test_bert_span_qa as squad
from tests.models.bert import test_bert_token_classifier as conll
from tests.training.runs import run_keras_attn


def _backbone_folder(path, vocabulary):
    path.mkdir()
    BertBackbone(
        vocabulary_size=len(vocabulary),
        num_layers=2,
        num_heads=4,
        hidden_dim=64,
        intermediate_dim=128,
        max_sequence_length=24,
        dropout=0.0,
        initializer_range=0.1,
    ).save(path / "backbone.keras")
    (path / "vocab.txt").write_text("\n".join(vocabulary) + "\n")
    return path


def _finetune(tmp_path, backbone, task, train, validation, steps):
    return run_keras_attn(
        [
            "finetune",
            "--task",
            task,
            "--backbone",
            str(backbone),
            "--train",
            str(train),
            "--validation",
            str(validation),
            "--sequence-length",
            "24",
            "--batch-size",
            "32",
            "--steps",
            str(steps),
            "--steps-per-epoch",
            str(steps // 2),
            "--learning-rate",
            "0.003",
            "--attention-every",
            "0",
            "--histogram-every",
            "0",
            "--output",
            str(tmp_path / "run"),
            "--verbose",
            "0",
        ]
    )


@pytest.mark.slow
def test_tagging_from_conll_files(tmp_path):
    backbone = _backbone_folder(tmp_path / "backbone", conll.VOCAB)
    output = _finetune(
        tmp_path,
        backbone,
        "tagging",
        conll._write_conll(tmp_path / "train.txt", 600, seed=0, bad_line=True),
        conll._write_conll(tmp_path / "dev.txt", 100, seed=1),
        steps=120,
    )
    assert "left out 1" in output  # the sentence with the malformed line, reported
    tags = json.loads((tmp_path / "run" / "labels.json").read_text())
    assert sorted(tags) == ["B-LOC", "B-PER", "O"]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["val_accuracy"] > 0.9, metrics  # per first piece of each word
    assert keras.saving.load_model(tmp_path / "run" / "model.keras").num_classes == 3
    # The trained tagger exports (checked and warm-up replayed by the command) and serves raw text.
    run_keras_attn(
        ["export", str(tmp_path / "run"), "--name", "ner", "--base", str(tmp_path / "saved")]
    )
    served = tf.saved_model.load(str(tmp_path / "saved" / "ner" / "1")).signatures[
        "serving_default"
    ]
    blocks = (tmp_path / "dev.txt").read_text().split("\n\n")[1:21]  # after -DOCSTART-
    sentences = [[line.split() for line in block.split("\n") if line.strip()] for block in blocks]
    outputs = served(text=tf.constant([" ".join(w for w, _ in sentence) for sentence in sentences]))
    words, served_tags = outputs["words"].numpy().astype(str), outputs["tags"].numpy().astype(str)
    right = total = 0
    for row, sentence in enumerate(sentences):
        assert words[row][: len(sentence)].tolist() == [w for w, _ in sentence]
        right += sum(served_tags[row][i] == tag for i, (_, tag) in enumerate(sentence))
        total += len(sentence)
    assert right / total > 0.9, right / total  # the served tagger is the trained one


@pytest.mark.slow
def test_span_qa_from_squad_files(tmp_path):
    backbone = _backbone_folder(tmp_path / "backbone", squad.VOCAB)
    _finetune(
        tmp_path,
        backbone,
        "span_qa",
        squad._write_squad(tmp_path / "train.json", 1000, seed=0, bad=True),
        squad._write_squad(tmp_path / "dev.json", 200, seed=1),
        steps=150,
    )
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert (
        metrics["val_start_logits_accuracy"] > 0.5 and metrics["val_end_logits_accuracy"] > 0.5
    ), metrics
    assert not (tmp_path / "run" / "labels.json").exists()


@pytest.mark.slow
def test_seq2seq_from_a_tsv_learns_and_writes_translations(tmp_path):
    import random

    from tensorboard.backend.event_processing import event_accumulator

    rng = random.Random(0)
    lines = []
    for _ in range(600):  # target: the source reversed and upper-cased
        words = [rng.choice("abcdefgh") for _ in range(rng.randint(2, 5))]
        lines.append(" ".join(words) + "\t" + " ".join(reversed(words)).upper())
    (tmp_path / "pairs.tsv").write_text("\n".join(lines) + "\n")
    run_keras_attn(
        [
            "seq2seq",
            "--pairs",
            str(tmp_path / "pairs.tsv"),
            "--held-out-sources",
            "30",
            "--source-vocabulary-size",
            "40",
            "--target-vocabulary-size",
            "40",
            "--num-layers",
            "1",
            "--hidden-dim",
            "64",
            "--intermediate-dim",
            "128",
            "--max-length",
            "8",
            "--dropout",
            "0",
            "--batch-size",
            "32",
            "--steps",
            "300",
            "--steps-per-epoch",
            "100",
            "--samples-every",
            "100",
            "--learning-rate",
            "0.003",
            "--histogram-every",
            "0",
            "--output",
            str(tmp_path / "run"),
            "--verbose",
            "0",
        ]
    )
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["val_accuracy"] > 0.8, metrics
    accumulator = event_accumulator.EventAccumulator(
        str(tmp_path / "run" / "logs" / "samples"), size_guidance={event_accumulator.TENSORS: 0}
    )
    accumulator.Reload()
    assert [e.step for e in accumulator.Tensors("samples")] == [100, 200, 300]
