"""A Hugging Face DeBERTa-v3 folder goes through `keras-attn convert`, fine-tunes
(classification and tagging) with its SentencePiece tokenizer, exports, and is served by
TensorFlow alone (no keras, no keras_attn) with the fine-tuned model's probabilities and
tags; the backbone converts back to a folder `transformers` loads, tokenizer included."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli import main
from keras_attn.cli.export import export_run
from keras_attn.data import tagging_inputs
from keras_attn.models import DebertaV3Classifier, DebertaV3TokenClassifier
from keras_attn.models.deberta import DebertaV3Tokenizer
from keras_attn.training import TrainingConfig, load_config, train
from keras_attn.training.tasks import TextClassificationTask
from tests.export.test_saved_model import tf_only
from tests.models.deberta.test_deberta_family import _config, perturbed
from tests.models.deberta.test_deberta_tokenizer import model_folder

TEXTS = ["a good film, señor 😀", "a dull plot", ""]


def _tag(tmp_path, backbone_folder, classifier_cls, tokenizer):
    """A tagging fine-tune on a CoNLL file, exported and served by TensorFlow alone: the
    served tags are the model's on each word's first piece."""
    conll = tmp_path / "tags.conll"
    conll.write_text("a O\ngood B-X\nfilm O\n\na O\ndull B-Y\nplot O\n\n" * 8)
    flags = {
        "model.backbone": str(backbone_folder),
        "model.sequence_length": 16,
        "data.task": "tagging",
        "data.train": str(conll),
        "training.batch_size": 4,
        "training.steps": 2,
        "training.validation_steps": 1,
        "training.attention_every": 0,
        "training.histogram_every": 0,
        "training.jit_compile": False,
    }
    task = TextClassificationTask()
    run = load_config({**task.sections, "training": TrainingConfig}, overrides=flags)
    result = train(task, run, tmp_path / "tagged", verbose=0)
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


@pytest.mark.slow
def test_convert_finetune_export_and_serve_without_keras(tmp_path, capsys):
    import transformers

    folder = model_folder(tmp_path / "hf", mask=False)
    reference = transformers.DebertaV2Model(_config(vocab_size=121, max_position_embeddings=32))
    perturbed(reference).save_pretrained(folder)
    target = main.main(["convert", str(folder), str(tmp_path / "keras")])
    out = capsys.readouterr().out
    assert "DebertaV3Backbone (deberta-v2): 2 layers" in out and "identical outputs" in out
    assert {p.name for p in target.parent.iterdir()} == {"backbone.keras", "spm.model"}

    csv = tmp_path / "reviews.csv"
    rows = ["text,label"] + [f"a good film {i},pos" for i in range(12)]
    csv.write_text("\n".join(rows + [f"a dull plot {i},neg" for i in range(12)]) + "\n")
    flags = {
        "model.backbone": str(target.parent),
        "model.sequence_length": 16,
        "data.train": str(csv),
        "data.text_column": "text",
        "data.label_column": "label",
        "training.batch_size": 8,
        "training.steps": 2,
        "training.validation_steps": 1,
        "training.attention_every": 0,
        "training.histogram_every": 0,
        "training.jit_compile": False,
    }
    task = TextClassificationTask()
    run = load_config({**task.sections, "training": TrainingConfig}, overrides=flags)
    result = train(task, run, tmp_path / "tuned", verbose=0)
    assert isinstance(task.tokenizer, DebertaV3Tokenizer)
    assert isinstance(result.model, DebertaV3Classifier)
    assert (tmp_path / "tuned" / "spm.model").is_file()

    version = export_run(tmp_path / "tuned", "deberta", tmp_path / "saved")
    assert (version / "assets" / "spm.model").read_bytes() == (folder / "spm.model").read_bytes()
    model = keras.saving.load_model(tmp_path / "tuned" / "model.keras")
    x = {k: v.numpy() for k, v in task.tokenizer(tf.constant(TEXTS)).items()}
    expected = tf.nn.softmax(model(x), -1).numpy()
    served = tf_only(version, {"serving_default": {"text": TEXTS}, "attention": {"text": TEXTS}})
    np.testing.assert_allclose(served["serving_default"]["probabilities"], expected, atol=1e-5)
    assert served["attention"]["tokens"][0][0] == "[CLS]"

    _tag(
        tmp_path,
        target.parent,
        DebertaV3TokenClassifier,
        lambda folder: DebertaV3Tokenizer.from_folder(folder, sequence_length=16),
    )

    main.main(["convert", str(target), str(tmp_path / "hf_again")])
    assert "transformers.AutoModel" in capsys.readouterr().out
    again = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf_again")
    ids = again(TEXTS, truncation=True, max_length=16, padding="max_length")["input_ids"]
    np.testing.assert_array_equal(ids, x["token_ids"])
