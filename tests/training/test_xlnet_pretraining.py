"""`keras-attn pretrain --objective xlnet`: an `XLNetBackbone` of the preset's size learns
permutation LM (special tokens never targets), the run resumes, backbone.keras is the
XLNet backbone; `finetune` on it builds an `XLNetClassifier` (classification only) and
`export` serves raw text with it; bad settings are named."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli.export import export_run
from keras_attn.errors import UserInputError
from keras_attn.export import export_saved_model
from keras_attn.models import XLNetBackbone, XLNetClassifier, XLNetPretrainer
from keras_attn.training import TrainingConfig, load_config
from keras_attn.training.config import ConfigError
from keras_attn.training.tasks import BertPretrainingTask, TextClassificationTask
from tests.training.runs import PRETRAIN_FLAGS, train_task, write_corpus

FLAGS = {**PRETRAIN_FLAGS, "model.objective": "xlnet", "model.partial_prediction": 4.0}


def _run(task, output, flags):
    return train_task(task, output, flags)


@pytest.mark.slow
def test_xlnet_pretrains_resumes_fine_tunes_and_exports(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", documents=16)
    flags = {**FLAGS, "data.corpus": str(corpus)}
    _run(BertPretrainingTask(), tmp_path / "run", {**flags, "training.steps": 2})
    task, result = _run(BertPretrainingTask(), tmp_path / "run", flags)
    assert (result.steps, result.resumed_from) == (4, 2)
    assert {"lm_loss", "accuracy", "val_loss"} <= set(result.history)
    pretrainer = keras.saving.load_model(tmp_path / "run" / "model.keras")
    assert isinstance(pretrainer, XLNetPretrainer) and pretrainer.partial_prediction == 4.0
    assert sorted(pretrainer.special_token_ids) == sorted(task.tokenizer.special_token_ids)
    backbone = keras.saving.load_model(tmp_path / "run" / "backbone.keras")
    assert isinstance(backbone, XLNetBackbone) and backbone.hidden_dim == 128
    # The special tokens ([CLS], [SEP]) are never targets.
    x = task.tokenizer(tf.constant(["in the beginning"]), tf.constant(["and the earth"]))
    order = pretrainer.sample_order({k: v.numpy() for k, v in x.items()})
    targets = np.asarray(order["target_ids"])[np.asarray(order["target_weights"]) > 0]
    assert targets.size and not set(targets.tolist()) & set(task.tokenizer.special_token_ids)

    with pytest.raises(UserInputError, match="XLNetBackbone, which has no serving signatures"):
        export_run(tmp_path / "run", "xlnet", tmp_path / "saved")

    csv = tmp_path / "reviews.csv"
    rows = ["text,label"] + [f"a good film {i},pos" for i in range(12)]
    csv.write_text("\n".join(rows + [f"a dull film {i},neg" for i in range(12)]) + "\n")
    finetune = {
        "model.backbone": str(tmp_path / "run"),
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
    task, result = _run(TextClassificationTask(), tmp_path / "tuned", finetune)
    assert isinstance(result.model, XLNetClassifier) and result.model.pooling == "first"
    # The query stream's start is pre-training's alone: fine-tuning leaves it out.
    assert all("mask_embedding" not in v.path for v in result.model.trainable_variables)
    reloaded = keras.saving.load_model(tmp_path / "tuned" / "model.keras")
    probe = {k: v.numpy() for k, v in task.tokenizer(tf.constant(["a good film"])).items()}
    np.testing.assert_allclose(reloaded(probe), result.model(probe), atol=1e-6)
    version = export_saved_model(result.model, task.tokenizer, tmp_path / "saved" / "1")
    served = tf.saved_model.load(str(version)).signatures["serving_default"]
    out = served(text=tf.constant(["a good film", "a dull film"]))
    assert out["probabilities"].shape == (2, 2)
    expected = tf.nn.softmax(result.model(task.tokenizer(tf.constant(["a good film"]))), -1)
    np.testing.assert_allclose(out["probabilities"][:1], expected, atol=1e-5)

    conll = tmp_path / "tags.conll"
    conll.write_text("a O\ngood B-X\n\na O\ndull B-Y\n\n")
    with pytest.raises(ConfigError, match="data.task"):
        _run(
            TextClassificationTask(),
            tmp_path / "tagging",
            {**finetune, "data.task": "tagging", "data.train": str(conll)},
        )


def test_partial_prediction_below_one_is_named():
    with pytest.raises(ConfigError, match="model.partial_prediction"):
        load_config(
            {**BertPretrainingTask.sections, "training": TrainingConfig},
            overrides={**FLAGS, "model.partial_prediction": 0.5},
        )
