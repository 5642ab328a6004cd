"""`keras-attn finetune` with `data.task: entity_typing` on an ERNIE pre-training run:
the marker added to the vocabulary, WordNet's linking in the input pipeline (per batch
and tokenised once), the TransE table frozen through fine-tuning, the run resumes;
`keras-attn export` reads the run's `entities.txt` and marker with nothing passed, and
the served types equal the model's on what the Python path (`EntityLinker`,
`ernie_inputs`) packs. A folder without `entities.txt`, a damaged one, a marker with a
space, a feature-based head: refused by name."""

import csv
import json
import random

import keras
import numpy as np
import pytest

from keras_attn.cli.predict_file import predict_file
from keras_attn.data import MentionTypingData, WordPieceTokenizer, mention_typing_inputs
from keras_attn.knowledge import EntityLinker, WordNet
from keras_attn.models import EntityTyping, ernie_inputs
from keras_attn.training.config import ConfigError
from keras_attn.training.tasks import (
    BertPretrainingTask,
    TextClassificationTask,
    text_classification,
)
from keras_attn.training.tasks.typing_setup import markable
from tests.training.runs import PRETRAIN_FLAGS, backbone_folder, train_task, write_corpus
from tests.training.test_ernie_pretraining import _vectors

pytestmark = pytest.mark.xdist_group("wordnet")
KINDS = {
    "noun.animal": ["giraffe", "lion", "sparrow", "camel", "goat"],
    "noun.plant": ["cedar", "fig tree", "oak", "lily", "vine"],
    "noun.time": ["evening", "morning", "night", "winter", "sabbath"],
}
FLAGS = {
    "data.task": "entity_typing",
    "model.sequence_length": 32,
    "training.batch_size": 8,
    "training.steps": 2,
    "training.steps_per_epoch": 2,
    "training.validation_steps": 1,
    "training.attention_every": 0,
    "training.histogram_every": 0,
    "training.jit_compile": False,
}


def _mentions(path, count=80, seed=0):
    """Typed mentions in varied sentences, and one row the reader reports."""
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["sentence", "start", "end", "type"])
        for _ in range(count):
            label = rng.choice(sorted(KINDS))
            word = rng.choice(KINDS[label])
            before = rng.choice(["And the", "Behold, a", "They saw the", "Über the"])
            text = f"{before} {word} {rng.choice(['was there.', 'came by the river.', 'passed.'])}"
            writer.writerow([text, len(before) + 1, len(before) + 1 + len(word), label])
        writer.writerow(["The lion.", 9, 4, "noun.animal"])  # reversed: left out
    return path


def _run(output, flags):
    return train_task(TextClassificationTask(), output, flags)


@pytest.fixture(scope="module")
def ernie_run(tmp_path_factory):
    """A two-step `pretrain --objective ernie` run (random vectors for every noun)."""
    folder = tmp_path_factory.mktemp("ernie")
    synsets, vectors = _vectors(folder / "vectors.npz")
    corpus = write_corpus(folder / "corpus.txt", documents=16)
    flags = {**PRETRAIN_FLAGS, "model.objective": "ernie", "data.corpus": str(corpus),
             "training.steps": 2, "model.entity_vectors": str(folder / "vectors.npz")}  # fmt: skip
    train_task(BertPretrainingTask(), folder / "run", flags)
    return folder / "run", synsets, vectors


@pytest.mark.slow  # 60 s: two fine-tuning runs, an export with WordNet's table
def test_typing_fine_tunes_resumes_and_serves_what_the_model_types(
    ernie_run, tmp_path, monkeypatch, capsys
):
    from keras_attn.cli import predict as predict_cli
    from keras_attn.cli.export import export_run

    pretrained, synsets, vectors = ernie_run
    flags = {**FLAGS, "data.train": str(_mentions(tmp_path / "mentions.csv")),
             "data.text_column": "sentence", "data.label_column": "type",
             "data.mention_start_column": "start", "data.mention_end_column": "end",
             "model.backbone": str(pretrained)}  # fmt: skip
    with monkeypatch.context() as patch:  # per batch, in the input pipeline
        patch.setattr(text_classification, "ONCE_TOKENS", 0)
        task, _ = _run(tmp_path / "run", flags)
    assert task.train_data.report.num_left_out == 1  # the reversed span
    _, result = _run(tmp_path / "run", {**flags, "training.steps": 4})  # tokenised once
    assert (result.steps, result.resumed_from) == (4, 2)
    assert np.isfinite(result.history["loss"]).all() and "val_accuracy" in result.history

    run = tmp_path / "run"
    vocabulary = (run / "vocab.txt").read_text().split("\n")[:-1]
    assert vocabulary[-1] == "[ENT]" and "[ENT]" not in (pretrained / "vocab.txt").read_text()
    assert (run / "entities.txt").read_text().split() == synsets
    assert (run / "WORDNET_LICENSE").read_text().startswith("WordNet Release 3.0")
    model = keras.saving.load_model(run / "model.keras")
    assert isinstance(model, EntityTyping) and model.backbone.vocabulary_size == len(vocabulary)
    table = keras.ops.convert_to_numpy(model.backbone.entity_embedding.embeddings)
    assert np.array_equal(table[1:], vectors)  # frozen through fine-tuning

    path = export_run(run, name="typing", base=tmp_path / "saved")  # nothing passed
    texts = ["Behold, a giraffe and a cedar by night.", "Über the lion’s den at evening."]
    starts = [texts[0].index("giraffe"), texts[1].index("evening")]
    ends = [starts[0] + len("giraffe"), starts[1] + len("evening")]
    served = predict_cli.predict(path, texts, mention_start=starts, mention_end=ends)
    ids = {s: i + 1 for i, s in enumerate(synsets)}
    tokenizer = WordPieceTokenizer(vocabulary, sequence_length=32)
    linker = EntityLinker(WordNet.load(), synsets=ids)
    packed = ernie_inputs(
        tokenizer,
        texts,
        [linker(t) for t in texts],
        ids,
        targets=list(zip(starts, ends, strict=True)),
    )
    assert packed["entity_ids"].any()  # the test links something
    expected = keras.ops.softmax(model.predict(packed, verbose=0))
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)
    labels = (run / "labels.json").read_text()
    assert all(label.decode() in labels for label in served["labels"])

    predict_cli.main([str(path), "--text", texts[0], "--mention-start", "10",
                      "--mention-end", "17"])  # fmt: skip
    assert "Behold, a [giraffe] and a cedar by night." in capsys.readouterr().out

    rows = tmp_path / "rows.csv"  # a file, its numbers checked row by row
    with open(rows, "w", newline="") as f:
        csv.writer(f).writerows([["text", "mention_start", "mention_end"], [texts[0], 10, 17],
                                 [texts[0], 10, "x"], [texts[0], 12, 3]])  # fmt: skip
    summary = predict_file(path, rows, tmp_path / "out.jsonl", progress=False)
    assert summary["predicted"] == 2 and summary["failed"][0][0] == 3
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert written[0]["labels"] == served["labels"][0].decode()
    assert "whole number" in written[1]["error"] and written[2]["label_ids"] == -1


@pytest.mark.slow  # 20 s: a tiny BERT fine-tuned and exported
def test_a_bert_backbone_types_from_the_text_alone(tmp_path):
    from keras_attn.cli.export import export_run
    from keras_attn.cli.predict import predict

    flags = {**FLAGS, "data.train": str(_mentions(tmp_path / "mentions.csv")),
             "data.text_column": "sentence", "data.label_column": "type",
             "data.mention_start_column": "start", "data.mention_end_column": "end",
             "model.backbone": str(backbone_folder(tmp_path / "bert")),
             "model.sequence_length": 16, "model.marker": "[TYPE]"}  # fmt: skip
    _run(tmp_path / "run", flags)
    assert (tmp_path / "run" / "vocab.txt").read_text().split()[-1] == "[TYPE]"
    assert not (tmp_path / "run" / "entities.txt").exists()
    path = export_run(tmp_path / "run", name="typing", base=tmp_path / "saved")
    out = predict(path, ["The lion passed."], mention_start=[4], mention_end=[8])
    assert out["probabilities"].shape == (1, 3) and out["label_ids"][0] >= 0
    assert not (path / "assets" / "WORDNET_LICENSE").exists()


@pytest.mark.slow  # 15 s: the set-up reads WordNet; every refusal comes before training
def test_what_typing_cannot_use_is_refused_by_name(ernie_run, tmp_path):
    import shutil

    pretrained, _, _ = ernie_run
    flags = {**FLAGS, "data.train": str(_mentions(tmp_path / "mentions.csv")),
             "data.text_column": "sentence", "data.label_column": "type",
             "data.mention_start_column": "start", "data.mention_end_column": "end"}  # fmt: skip
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("backbone.keras", "vocab.txt", "config.yaml"):
        shutil.copy(pretrained / name, bare / name)
    with pytest.raises(ConfigError, match="model.backbone.*entities.txt.*has none"):
        _run(tmp_path / "a", {**flags, "model.backbone": str(bare)})
    (bare / "entities.txt").write_text("01855672-n\n01855672-n\n")
    with pytest.raises(ConfigError, match="Expected 82115 synsets.*Received: 2"):
        _run(tmp_path / "b", {**flags, "model.backbone": str(bare)})
    with pytest.raises(ConfigError, match="model.marker.*no space"):
        _run(tmp_path / "c", {**flags, "model.backbone": str(pretrained), "model.marker": "[E T]"})
    with pytest.raises(ConfigError, match="model.feature_based.*none for entity_typing"):
        _run(tmp_path / "d", {**flags, "model.backbone": str(pretrained),
                              "model.feature_based": "last"})  # fmt: skip
    # Two synsets swapped in a copy of the run's entities.txt (its digest beside it):
    # each word would link to the other's TransE row.
    lines = (pretrained / "entities.txt").read_text().splitlines()
    lines[0], lines[1] = lines[1], lines[0]
    (bare / "entities.txt").write_text("\n".join(lines) + "\n")
    shutil.copy(pretrained / "entities.sha256", bare / "entities.sha256")
    with pytest.raises(ConfigError, match="entities.txt is not the file its run wrote"):
        _run(tmp_path / "e", {**flags, "model.backbone": str(bare)})
    # A typing file of one label: its --label-column named (not CoNLL's tag column).
    rows = (tmp_path / "mentions.csv").read_text().splitlines()
    one = [rows[0]] + [",".join(r.split(",")[:-1] + ["noun.animal"]) for r in rows[1:]]
    (tmp_path / "one.csv").write_text("\n".join(one) + "\n")
    with pytest.raises(ConfigError, match="data.label_column.*at least two labels"):
        _run(tmp_path / "f", {**flags, "data.train": str(tmp_path / "one.csv"),
                              "model.backbone": str(pretrained)})  # fmt: skip
    assert not any((tmp_path / name / "model.keras").exists() for name in "abcdef")


def test_a_mention_no_piece_covers_is_left_out_not_typed():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[ENT]", "cafe", "lion"]
    tokenizer = WordPieceTokenizer(vocab, sequence_length=8)  # lower-cases, drops accents
    texts = ["lion \u0301 cafe", "lion \u0301 cafe"]  # a combining accent alone
    data = MentionTypingData(texts, [5, 7], [6, 11], [0, 1], ["a", "b"])
    assert markable(data, tokenizer) == [1]  # the accent is dropped: no piece to mark
    x, ok = mention_typing_inputs(tokenizer, texts, [5, 7], [6, 11], 5)
    assert ok.numpy().tolist() == [False, True]
    assert x["token_ids"].numpy()[1].tolist() == [2, 7, 5, 6, 5, 3, 0, 0]
