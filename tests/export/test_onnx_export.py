"""`export_onnx`: a classifier as one ONNX file that takes raw text (WordPiece as
`onnxruntime-extensions`' `BertTokenizer`, the model by tf2onnx), run by ONNX Runtime
in a process that imports neither keras nor TensorFlow: the SavedModel's labels on the
Rotten Tomatoes test snippets, its probabilities; the tokenizer graph packs as
`WordPieceTokenizer`; what ONNX cannot hold yet is named."""

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer, rotten_tomatoes
from keras_attn.export import export_saved_model
from keras_attn.export.onnx_export import export_onnx, onnx_session
from keras_attn.export.onnx_tokenizer import INPUTS, wordpiece_graph
from keras_attn.models import BertBackbone, BertClassifier, BertTokenClassifier
from tests.export.vocabulary import rotten_tomatoes_vocabulary

# Runs an exported file as a user's service would: onnxruntime and its extensions'
# operators, nothing of ours; says whether keras or TensorFlow got imported.
ONNX_ONLY = """
import json, sys
import numpy as np
import onnxruntime, onnxruntime_extensions
options = onnxruntime.SessionOptions()
options.register_custom_ops_library(onnxruntime_extensions.get_library_path())
session = onnxruntime.InferenceSession(sys.argv[1], options)
texts = json.loads(sys.argv[2])
outputs = session.run(None, {"text": np.array(texts, dtype=object)})
names = [o.name for o in session.get_outputs()]
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"tensorflow", "keras", "tf_keras"})
print(json.dumps({"names": names, "loaded": loaded,
                  "probabilities": outputs[0].tolist(), "label_ids": outputs[1].tolist(),
                  "labels": [str(x) for x in outputs[2]]}))
"""

PROBES = [
    "A good film, señor!",
    "Déjà vu: the CAFÉ scene (again) — 3.5 stars?",
    "中文 and 日本語 words",
    "unbelievably long " * 40,
    "",
    "  spaces\tand\ttabs  ",
]


@pytest.fixture(scope="module")
def snippets():
    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    return test.texts[:1000]


def _vocabulary():
    return rotten_tomatoes_vocabulary()


@pytest.fixture(scope="module")
def tokenizer(snippets):
    return WordPieceTokenizer(_vocabulary(), sequence_length=64)


def _run_without_tensorflow(path, texts):
    completed = subprocess.run(
        [sys.executable, "-c", ONNX_ONLY, str(path), json.dumps(texts)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_the_tokenizer_graph_packs_as_the_wordpiece_tokenizer(tokenizer, tmp_path):
    import onnx

    onnx.save(wordpiece_graph(tokenizer), str(tmp_path / "tokenizer.onnx"))
    session = onnx_session(tmp_path / "tokenizer.onnx", threads=1)
    ids, segments, mask = session.run(list(INPUTS), {"text": np.array(PROBES, dtype=object)})
    ours = tokenizer(tf.constant(PROBES))
    longest = int(ours["padding_mask"].numpy().sum(1).max())
    assert ids.shape == (len(PROBES), longest) and ids.dtype == np.int32
    np.testing.assert_array_equal(ids, ours["token_ids"].numpy()[:, :longest])
    np.testing.assert_array_equal(segments, ours["segment_ids"].numpy()[:, :longest])
    np.testing.assert_array_equal(mask, ours["padding_mask"].numpy()[:, :longest])


@pytest.mark.parametrize("length", [32, 33])  # odd and even budgets for the pair
def test_pairs_are_trimmed_and_packed_as_the_wordpiece_tokenizer(tmp_path, snippets, length):
    import onnx

    tokenizer = WordPieceTokenizer(_vocabulary(), sequence_length=length)
    onnx.save(wordpiece_graph(tokenizer, text_pair=True), str(tmp_path / "pairs.onnx"))
    first = [t for t in snippets[:300] if t.isascii()] + ["", "a short one", ""]
    second = [t for t in snippets[300:600] if t.isascii()][: len(first) - 3] + ["x", "", ""]
    session = onnx_session(tmp_path / "pairs.onnx")
    feeds = {"text": np.array(first, dtype=object), "text_pair": np.array(second, dtype=object)}
    ids, segments, mask = session.run(list(INPUTS), feeds)
    ours = tokenizer(tf.constant(first), tf.constant(second))
    longest = ids.shape[1]
    assert longest == int(ours["padding_mask"].numpy().sum(1).max())
    for name, got in zip(INPUTS, (ids, segments, mask), strict=True):
        np.testing.assert_array_equal(got, ours[name].numpy()[:, :longest])


@pytest.mark.slow
def test_the_onnx_classifier_answers_as_the_saved_model_without_tensorflow(
    tmp_path, tokenizer, snippets
):
    backbone = BertBackbone.from_size(
        "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=64
    )
    model = BertClassifier(backbone, num_classes=2)
    labels = ["rotten", "fresh"]
    path = export_onnx(model, tokenizer, tmp_path / "classifier.onnx", labels=labels)
    saved = export_saved_model(model, tokenizer, tmp_path / "saved" / "1", labels=labels)
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    expected = served(text=tf.constant(snippets))

    got = _run_without_tensorflow(path, snippets)
    assert got["loaded"] == []
    assert got["names"] == ["probabilities", "label_ids", "labels"]
    same = np.asarray(got["label_ids"]) == expected["label_ids"].numpy()
    assert same.mean() >= 0.999, same.mean()
    assert got["labels"] == [labels[i] for i in got["label_ids"]]
    # Texts without compatibility characters (see docs/serving.md) are tokenised alike.
    plain = [t.isascii() for t in snippets]
    difference = np.abs(np.asarray(got["probabilities"]) - expected["probabilities"].numpy())
    assert difference[plain].max() <= 1e-5
    # Bad requests: an empty text, 20,000 characters, bytes that were not UTF-8 (as
    # callers read them: U+FFFD) answer as the SavedModel does (an empty batch: below).
    bad = ["", "x" * 20_000, "word " * 4_000, b"bad \xff film".decode("utf-8", "replace")]
    got, expected = _run_without_tensorflow(path, bad), served(text=tf.constant(bad))
    assert got["labels"] == [x.decode() for x in expected["labels"].numpy()]
    np.testing.assert_allclose(got["probabilities"], expected["probabilities"].numpy(), atol=1e-5)

    # A classifier of pairs: inputs text and text_pair, the SavedModel's labels.
    pairs = export_onnx(model, tokenizer, tmp_path / "pairs.onnx", labels, text_pair=True)
    saved = export_saved_model(
        model, tokenizer, tmp_path / "pairs" / "1", labels=labels, text_pair=True
    )
    first, second = snippets[:200], snippets[200:400]
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    expected = served(text=tf.constant(first), text_pair=tf.constant(second))
    session = onnx_session(pairs)
    assert sorted(i.name for i in session.get_inputs()) == ["text", "text_pair"]
    feeds = {"text": np.array(first, dtype=object), "text_pair": np.array(second, dtype=object)}
    label_ids = session.run(None, feeds)[1]
    assert (label_ids == expected["label_ids"].numpy()).mean() >= 0.99


@pytest.mark.parametrize("text_pair", [False, True])
def test_an_empty_request_gets_empty_answers(tmp_path, text_pair):
    tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "film"])
    model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=6), num_classes=3)
    session = onnx_session(export_onnx(model, tokenizer, tmp_path / "m.onnx", text_pair=text_pair))
    names = [i.name for i in session.get_inputs()]
    empty = session.run(None, {name: np.array([], dtype=object) for name in names})
    assert [o.shape for o in empty] == [(0, 3), (0,), (0,)]
    one = session.run(None, {name: np.array(["film"], dtype=object) for name in names})
    assert [o.shape for o in one] == [(1, 3), (1,), (1,)]


def test_what_the_onnx_export_cannot_hold_is_named(tmp_path, tokenizer):
    backbone = BertBackbone.from_size("tiny", vocabulary_size=tokenizer.vocabulary_size)
    with pytest.raises(ValueError, match="Expected a classifier .* BertTokenClassifier"):
        export_onnx(BertTokenClassifier(backbone, num_classes=3), tokenizer, tmp_path / "x.onnx")

    class OtherTokenizer:
        sequence_length = 16

    with pytest.raises(ValueError, match="WordPieceTokenizer.*Received: OtherTokenizer"):
        export_onnx(BertClassifier(backbone, num_classes=2), OtherTokenizer(), tmp_path / "y")
    with pytest.raises(ValueError, match="quantize"):
        export_onnx(
            BertClassifier(backbone, num_classes=2), tokenizer, tmp_path / "q", None, "4bit"
        )
    with pytest.raises(ValueError, match="one per class"):
        export_onnx(BertClassifier(backbone, num_classes=2), tokenizer, tmp_path / "z", ["a"])
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_export_and_predict_commands_in_every_format(tmp_path, capsys):
    from keras_attn.cli import export, predict
    from keras_attn.cli.user_errors import CommandError
    from keras_attn.errors import UserInputError
    from tests.training.runs import backbone_folder, finetune_in_process, write_reviews

    reviews = write_reviews(tmp_path / "reviews.csv", count=40)
    finetune_in_process(backbone_folder(tmp_path / "backbone"), reviews, tmp_path / "run")
    path = export.main(["--format", "onnx", str(tmp_path / "run"), "--base", str(tmp_path)])
    assert path == tmp_path / "run" / "onnx" / "1" / "model.onnx"
    assert "keras-attn predict" in capsys.readouterr().out
    texts = ["the film was good .", "very awful plot ."]
    outputs = predict.main([str(path), "--text", texts[0], "--text", texts[1]])
    printed = capsys.readouterr().out.splitlines()
    saved = export.main([str(tmp_path / "run"), "--base", str(tmp_path)])
    capsys.readouterr()
    expected = predict.predict(saved, texts)
    assert outputs["labels"].tolist() == expected["labels"].tolist()
    np.testing.assert_allclose(outputs["probabilities"], expected["probabilities"], atol=1e-5)
    assert [line.split()[0] for line in printed] == [x.decode() for x in expected["labels"]]

    int8 = export.main(
        ["--format", "onnx", "--quantize", "int8", str(tmp_path / "run"), "--base", str(tmp_path)]
    )
    assert int8 == tmp_path / "run" / "onnx" / "2" / "model.onnx"
    assert int8.stat().st_size < 0.5 * path.stat().st_size
    quantized = predict.predict(int8, texts)
    assert set(quantized) == set(outputs)
    # Its labels are its probabilities' argmax; how close int8 stays to float32 is
    # measured on a trained model, not on this one of a few steps whose two classes
    # are near 0.5 (tests/export/test_quantization.py: 2,562 snippets).
    np.testing.assert_allclose(quantized["probabilities"].sum(-1), 1.0, atol=1e-5)
    assert quantized["label_ids"].tolist() == quantized["probabilities"].argmax(-1).tolist()
    with pytest.raises(UserInputError, match="no use for --text-pair"):
        predict.predict(path, texts, texts)
    # The batch predictor: the same outputs per row as from the SavedModel.
    rows = tmp_path / "rows.csv"
    rows.write_text("text\n" + "\n".join(texts) + "\n")
    for model, output in ((path, "onnx.jsonl"), (saved, "saved.jsonl")):
        predict.main([str(model), "--input", str(rows), "--output", str(tmp_path / output)])
    onnx_rows, saved_rows = (
        [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
        for name in ("onnx.jsonl", "saved.jsonl")
    )
    assert [r["labels"] for r in onnx_rows] == [r["labels"] for r in saved_rows]
    assert [r["error"] for r in onnx_rows] == ["", ""]
    np.testing.assert_allclose(
        [r["probabilities"] for r in onnx_rows], [r["probabilities"] for r in saved_rows], atol=1e-5
    )
    (tmp_path / "damaged.onnx").write_bytes(path.read_bytes()[:1000])
    with pytest.raises(CommandError, match="^error: .*damaged.onnx: not an ONNX model"):
        predict.main([str(tmp_path / "damaged.onnx"), "--text", "a"])
    with pytest.raises(CommandError, match="^error: .*no such ONNX file"):
        predict.main([str(tmp_path / "none.onnx"), "--input", str(rows), "--output", "b.csv"])

    # --format openvino: the same labels and probabilities as the SavedModel; an empty
    # request answered by `predict` (OpenVINO cannot read an empty string tensor).
    from keras_attn.cli.predict_file import serving_default

    xml = export.main(["--format", "openvino", str(tmp_path / "run"), "--base", str(tmp_path)])
    assert xml == tmp_path / "run" / "openvino" / "1" / "model.xml"
    assert "openvino-tokenizers" in capsys.readouterr().out
    answered = predict.predict(xml, texts)
    assert answered["labels"].tolist() == expected["labels"].tolist()
    np.testing.assert_allclose(answered["probabilities"], expected["probabilities"], atol=1e-5)
    predict.main([str(xml), "--input", str(rows), "--output", str(tmp_path / "ov.jsonl")])
    ov_rows = [json.loads(line) for line in (tmp_path / "ov.jsonl").read_text().splitlines()]
    assert [r["labels"] for r in ov_rows] == [r["labels"] for r in saved_rows]
    call, inputs, _ = serving_default(xml)
    assert inputs == ["text"]
    empty = call(text=[])
    assert [empty[n].shape for n in ("probabilities", "label_ids", "labels")] == [
        (0, 2),
        (0,),
        (0,),
    ]
    (tmp_path / "damaged.xml").write_text(xml.read_text()[:500])
    with pytest.raises(CommandError, match="^error: .*damaged.xml: not an OpenVINO model"):
        predict.main([str(tmp_path / "damaged.xml"), "--text", "a"])

    # --format litert (and its int8): the SavedModel's labels; an empty request.
    tflite = export.main(["--format", "litert", str(tmp_path / "run"), "--base", str(tmp_path)])
    assert tflite == tmp_path / "run" / "litert" / "1" / "model.tflite"
    assert "ai-edge-litert" in capsys.readouterr().out
    answered = predict.predict(tflite, texts)
    assert answered["labels"].tolist() == expected["labels"].tolist()
    np.testing.assert_allclose(answered["probabilities"], expected["probabilities"], atol=1e-5)
    call, inputs, _ = serving_default(tflite)
    assert inputs == ["text"] and call(text=[])["labels"].shape == (0,)
    small = export.main(
        ["--format", "litert", "--quantize", "int8", str(tmp_path / "run"), "--base", str(tmp_path)]
    )
    assert small.stat().st_size < 0.6 * tflite.stat().st_size
    assert set(predict.predict(small, texts)) == set(answered)
    (tmp_path / "damaged.tflite").write_bytes(tflite.read_bytes()[:2000])
    with pytest.raises(CommandError, match="^error: .*damaged.tflite: not a LiteRT model"):
        predict.main([str(tmp_path / "damaged.tflite"), "--text", "a"])
