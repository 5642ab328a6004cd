"""The end-to-end path every encoder family's tests walk (internal to the tests): a
converted backbone folder fine-tuned by `keras-attn finetune`'s task, exported by
`keras-attn export`, served by TensorFlow alone."""

import contextlib
import io

import keras
import numpy as np
import tensorflow as tf

from keras_attn.cli.export import export_run
from keras_attn.data import span_qa_inputs, tagging_inputs
from keras_attn.training import TrainingConfig, load_config, train
from keras_attn.training.tasks import TextClassificationTask
from tests.export.test_saved_model import tf_only
from tests.helpers import eagerly

TRAINING = {
    "model.sequence_length": 16,
    "training.steps": 2,
    "training.validation_steps": 1,
    "training.attention_every": 0,
    "training.histogram_every": 0,
    "training.jit_compile": False,
}


def convert(folder, target):
    """`keras-attn convert folder target` (a module fixture's: no `capsys`): the backbone
    file written and what the command printed."""
    from keras_attn.cli import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        written = main.main(["convert", str(folder), str(target)])
    return written, printed.getvalue()


def assert_converts_back(backbone, output, texts, token_ids):
    """`keras-attn convert` of a converted `backbone` file back out: a folder
    `transformers` loads, tokenizer too, whose ids for `texts` are `token_ids`."""
    import transformers

    _, printed = convert(backbone, output)
    assert "transformers.AutoModel" in printed
    again = transformers.AutoTokenizer.from_pretrained(output)
    ids = again(texts, truncation=True, max_length=16, padding="max_length")["input_ids"]
    np.testing.assert_array_equal(ids, token_ids)


def finetune(backbone_folder, output, **flags):
    """`(task, result)` of a two-step fine-tune on `backbone_folder` into `output`."""
    task = TextClassificationTask()
    overrides = {**TRAINING, "model.backbone": str(backbone_folder), **flags}
    run = load_config({**task.sections, "training": TrainingConfig}, overrides=overrides)
    with eagerly():  # the steps traced: tests/models/<family>/test_<family>_family.py
        return task, train(task, run, output, verbose=0)


def classify_export_and_serve(tmp_path, backbone_folder, texts, name):
    """A classification fine-tune on a CSV, exported and served by TensorFlow alone:
    the served probabilities are the reloaded model's (<= 1e-5). Returns `(task,
    result, version, inputs, served)` for the family's own checks."""
    csv = tmp_path / "reviews.csv"
    rows = ["text,label"] + [f"a good film {i},pos" for i in range(12)]
    csv.write_text("\n".join(rows + [f"a dull plot {i},neg" for i in range(12)]) + "\n")
    task, result = finetune(
        backbone_folder,
        tmp_path / "tuned",
        **{"data.train": str(csv), "data.text_column": "text", "data.label_column": "label"},
        **{"training.batch_size": 8},
    )
    version = export_run(tmp_path / "tuned", name, tmp_path / "saved")
    model = keras.saving.load_model(tmp_path / "tuned" / "model.keras")
    x = {k: v.numpy() for k, v in task.tokenizer(tf.constant(texts)).items()}
    expected = tf.nn.softmax(model(x), -1).numpy()
    served = tf_only(version, {"serving_default": {"text": texts}, "attention": {"text": texts}})
    np.testing.assert_allclose(served["serving_default"]["probabilities"], expected, atol=1e-5)
    return task, result, version, x, served


def tag_export_and_serve(tmp_path, backbone_folder, classifier_cls, tokenizer):
    """A tagging fine-tune on a CoNLL file, exported and served by TensorFlow alone: the
    served tags are the model's on each word's first piece."""
    conll = tmp_path / "tags.conll"
    conll.write_text("a O\ngood B-X\nfilm O\n\na O\ndull B-Y\nplot O\n\n" * 8)
    _, result = finetune(
        backbone_folder,
        tmp_path / "tagged",
        **{"data.task": "tagging", "data.train": str(conll), "training.batch_size": 4},
    )
    assert isinstance(result.model, classifier_cls)
    version = export_run(tmp_path / "tagged", "tagger", tmp_path / "saved_tags")
    served = tf_only(version, {"serving_default": {"text": ["a good film", "a dull plot"]}})
    served = served["serving_default"]
    assert [w[:3] for w in served["words"]] == [["a", "good", "film"], ["a", "dull", "plot"]]
    x = tagging_inputs(tokenizer(tmp_path / "tagged"), [["a", "good", "film"]])
    model = keras.saving.load_model(tmp_path / "tagged" / "model.keras")
    logits = np.asarray(
        model({k: x[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")})
    )
    first = [int(np.flatnonzero(x["word_ids"].numpy()[0] == w)[0]) for w in range(3)]
    assert served["tag_ids"][0][:3] == logits[0, first].argmax(-1).tolist()


def answer_export_and_serve(tmp_path, backbone_folder, qa_cls, tokenizer):
    """A span-QA fine-tune on a SQuAD file, exported and served by TensorFlow alone: the
    served answer is the reloaded model's best span, as text of the context."""
    from tests.models.bert.test_bert_span_qa import _write_squad

    squad = _write_squad(tmp_path / "squad.json", 16, seed=0)
    _, result = finetune(
        backbone_folder,
        tmp_path / "qa",
        **{"data.task": "span_qa", "data.train": str(squad), "training.batch_size": 4},
        **{"model.sequence_length": 32},
    )
    assert isinstance(result.model, qa_cls)
    version = export_run(tmp_path / "qa", "qa", tmp_path / "saved_qa")
    questions = ["what hat ?", "who ?"]
    contexts = ["ann wears a hat . bob eats a fig .", "señor 😀 sings"]
    served = tf_only(version, {"serving_default": {"question": questions, "context": contexts}})
    served = served["serving_default"]
    x = span_qa_inputs(tokenizer(tmp_path / "qa"), questions, contexts)
    model = keras.saving.load_model(tmp_path / "qa" / "model.keras")
    outputs = model({k: x[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")})
    starts, ends, scores = qa_cls.decode_spans(
        outputs["start_logits"], outputs["end_logits"], x["context_mask"]
    )
    for row, context in enumerate(contexts):
        start_byte = int(x["token_starts"][row, int(starts[row])])
        end_byte = int(x["token_ends"][row, int(ends[row])])
        assert served["answer"][row] == context.encode()[start_byte:end_byte].decode()
        assert (served["answer_start"][row], served["answer_end"][row]) == (start_byte, end_byte)
        np.testing.assert_allclose(served["score"][row], float(scores[row]), atol=1e-5)


def assert_span_labels_as_transformers(tokenizer, reference, questions, contexts, answers):
    """`span_qa_inputs` packs each pair as `reference` (a `transformers` tokenizer)
    does, marks its context pieces (`sequence_ids() == 1`) and labels the first and
    last context pieces that overlap the answer in `reference`'s character offsets,
    as `transformers`' question-answering examples do; the labelled pieces' byte
    spans hold the answer."""
    from keras_attn.data import span_qa_inputs

    starts = [len(c[: c.index(a)].encode()) for c, a in zip(contexts, answers, strict=True)]
    ends = [s + len(a.encode()) for s, a in zip(starts, answers, strict=True)]
    x = span_qa_inputs(tokenizer, questions, contexts, starts, ends)
    length = tokenizer.sequence_length
    for row, (question, context, answer) in enumerate(
        zip(questions, contexts, answers, strict=True)
    ):
        theirs = reference(
            question, context, max_length=length, padding="max_length", return_offsets_mapping=True
        )
        assert x["token_ids"][row].numpy().tolist() == theirs["input_ids"]
        in_context = [s == 1 for s in theirs.sequence_ids()]
        assert x["context_mask"][row].numpy().tolist() == [int(c) for c in in_context]
        first, last = context.index(answer), context.index(answer) + len(answer)
        overlapping = [
            i
            for i, (c, (s, e)) in enumerate(zip(in_context, theirs["offset_mapping"], strict=True))
            if c and s < last and e > first
        ]
        start, end = int(x["start_positions"][row]), int(x["end_positions"][row])
        assert (start, end) == (overlapping[0], overlapping[-1])
        span = context.encode()[x["token_starts"][row, start] : x["token_ends"][row, end]]
        assert span.decode() == answer
