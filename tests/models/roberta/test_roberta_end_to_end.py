"""A Hugging Face RoBERTa folder goes through `keras-attn convert`, fine-tunes
(classification and tagging) with the family's own tokenizer, exports, and is served by
TensorFlow alone (no keras, no keras_attn) with the fine-tuned model's probabilities and
tags; the backbone converts back to a folder `transformers` loads."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli import main
from keras_attn.cli.export import export_run
from keras_attn.data import tagging_inputs
from keras_attn.models import BertClassifier, BertTokenClassifier, RobertaBackbone
from keras_attn.models.roberta import RobertaTokenizer
from keras_attn.training import TrainingConfig, load_config, train
from keras_attn.training.tasks import TextClassificationTask
from tests.export.test_saved_model import tf_only
from tests.models.roberta.test_roberta_family import perturbed
from tests.models.roberta.test_roberta_tokenizer import vocabulary_folder

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

    folder = vocabulary_folder(tmp_path / "hf")
    config = transformers.RobertaConfig(
        vocab_size=400,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=34,
    )
    perturbed(transformers.RobertaModel(config)).save_pretrained(folder)
    target = main.main(["convert", str(folder), str(tmp_path / "keras")])
    out = capsys.readouterr().out
    assert "RobertaBackbone (roberta): 2 layers" in out and "identical outputs" in out
    assert {p.name for p in target.parent.iterdir()} == {
        "backbone.keras",
        "vocab.json",
        "merges.txt",
    }

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
    assert isinstance(task.tokenizer, RobertaTokenizer)
    assert isinstance(result.model, BertClassifier)
    assert isinstance(result.model.backbone, RobertaBackbone)
    assert (tmp_path / "tuned" / "merges.txt").is_file()
    assert not (tmp_path / "tuned" / "vocab.txt").exists()

    version = export_run(tmp_path / "tuned", "roberta", tmp_path / "saved")
    assert json.loads((version / "assets" / "vocab.json").read_text())["<mask>"] == 4
    model = keras.saving.load_model(tmp_path / "tuned" / "model.keras")
    x = {k: v.numpy() for k, v in task.tokenizer(tf.constant(TEXTS)).items()}
    expected = tf.nn.softmax(model(x), -1).numpy()
    served = tf_only(version, {"serving_default": {"text": TEXTS}, "attention": {"text": TEXTS}})
    np.testing.assert_allclose(served["serving_default"]["probabilities"], expected, atol=1e-5)
    assert served["attention"]["tokens"][0][0] == "<s>"

    # And back out: the converted backbone is a folder transformers loads, tokenizer too.
    _tag(
        tmp_path,
        target.parent,
        BertTokenClassifier,
        lambda folder: RobertaTokenizer.from_folder(folder, sequence_length=16),
    )

    main.main(["convert", str(target), str(tmp_path / "hf_again")])
    assert "transformers.AutoModel" in capsys.readouterr().out
    again = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf_again")
    ids = again(TEXTS, truncation=True, max_length=16, padding="max_length")["input_ids"]
    np.testing.assert_array_equal(ids, x["token_ids"])


def test_a_backbone_folder_without_a_readable_tokenizer_is_one_configuration_error(tmp_path):
    from keras_attn.training.config import ConfigError
    from keras_attn.training.tasks.text_classification import load_backbone

    RobertaBackbone.from_size("tiny", vocabulary_size=50, max_sequence_length=16).save(
        tmp_path / "backbone.keras"
    )
    with pytest.raises(ConfigError, match=r"vocab.json, merges.txt\); .* has no vocab.json"):
        load_backbone(str(tmp_path), sequence_length=16)
    (tmp_path / "vocab.json").write_text('{"a": 0}')
    (tmp_path / "merges.txt").write_text("")
    with pytest.raises(ConfigError, match="model.backbone.*special tokens"):
        load_backbone(str(tmp_path), sequence_length=16)
