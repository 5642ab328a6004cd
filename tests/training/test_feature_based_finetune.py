"""`keras-attn finetune --feature-based MIX`: a BiLSTM head learns on the frozen backbone,
whose weights leave the run as they came; the run exports and serves as a fine-tune
does; what cannot be built is one configuration error."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli.export import export_run
from keras_attn.models import FeatureBasedClassifier, FeatureBasedTagger
from keras_attn.training.config import ConfigError
from tests.export.test_saved_model import tf_only
from tests.models.end_to_end import finetune
from tests.training.runs import backbone_folder, write_reviews

FLAGS = {"data.text_column": "review", "data.label_column": "sentiment"}


def _assert_serves_as_reloaded(task, run, saved, texts):
    """The run's export serves the probabilities of its reloaded `model.keras`."""
    version = export_run(run, "features", saved)
    x = {k: v.numpy() for k, v in task.tokenizer(tf.constant(texts)).items()}
    reloaded = keras.saving.load_model(run / "model.keras")
    expected = tf.nn.softmax(reloaded(x), -1).numpy()
    served = tf_only(version, {"serving_default": {"text": texts}})["serving_default"]
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)


@pytest.mark.slow  # over 10 s: left out of `make test-fast`
def test_a_feature_based_run_trains_the_head_only_and_serves(tmp_path):
    folder = backbone_folder(tmp_path / "backbone")
    reviews = write_reviews(tmp_path / "reviews.csv", count=48, bad_row=False)
    task, result = finetune(
        folder, tmp_path / "run", **FLAGS, **{"data.train": str(reviews)},
        **{"model.feature_based": "scalar-mix", "model.lstm_units": 8, "training.steps": 4},
    )  # fmt: skip
    model = result.model
    assert isinstance(model, FeatureBasedClassifier) and model.features == "scalar-mix"
    before = keras.saving.load_model(folder / "backbone.keras")
    for ours, theirs in zip(model.backbone.weights, before.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    _assert_serves_as_reloaded(
        task, tmp_path / "run", tmp_path / "saved", ["the film was good", "awful plot"]
    )


def test_the_head_follows_the_task_and_refuses_what_cannot_be_built(tmp_path):
    from keras_attn.models import BertBackbone
    from keras_attn.training.task_configs import ClassifierModelConfig
    from keras_attn.training.tasks.text_classification import feature_based_head

    backbone = BertBackbone(30, 2, 2, 16, 32)
    settings = ClassifierModelConfig(feature_based="last", lstm_units=4, lstm_layers=2)
    tagger = feature_based_head("tagging", backbone, 3, settings)
    assert isinstance(tagger, FeatureBasedTagger) and tagger.lstm_layers == 2
    deep = ClassifierModelConfig(feature_based="concat-last-4")
    with pytest.raises(ConfigError, match="model.feature_based.*4 or more layers"):
        feature_based_head("classification", backbone, 2, deep)
    folder = backbone_folder(tmp_path / "backbone")
    with pytest.raises(ConfigError, match="model.feature_based.*none for span_qa"):
        finetune(folder, tmp_path / "qa", **{"data.task": "span_qa", "data.train": "x.json",
                                              "model.feature_based": "last"})  # fmt: skip


def test_lora_on_a_frozen_backbone_is_refused(tmp_path):
    folder = backbone_folder(tmp_path / "backbone")
    with pytest.raises(ConfigError, match="training.lora_rank.*null with model.feature_based"):
        finetune(folder, tmp_path / "run", **{"model.feature_based": "last",
                                               "training.lora_rank": 2})  # fmt: skip


def test_the_choices_are_the_model_s():
    from keras_attn.models.feature_based import FEATURES
    from keras_attn.training.task_configs import FEATURE_MIXES

    assert FEATURE_MIXES == ("none", *FEATURES)


@pytest.mark.slow
def test_an_elmo_lm_run_feeds_a_feature_based_fine_tune_that_serves(tmp_path):
    from keras_attn.cli.main import main
    from keras_attn.errors import UserInputError
    from keras_attn.models import ElmoBiLM
    from keras_attn.training import TrainingConfig, load_config
    from keras_attn.training.tasks import LanguageModelTask
    from tests.training.runs import write_corpus

    corpus = write_corpus(tmp_path / "corpus.txt")
    flags = ["--architecture", "elmo", "--corpus", str(corpus), "--vocabulary-size", "200",
             "--held-out-documents", "4", "--num-layers", "2", "--hidden-dim", "32",
             "--projection-dim", "16", "--sequence-length", "16", "--batch-size", "8",
             "--steps", "4", "--histogram-every", "0", "--jit-compile", "false",
             "--character-cnn", "true", "--verbose", "0"]  # fmt: skip
    result = main(["lm", *flags, "--output", str(tmp_path / "elmo")])
    assert {"val_forward_logits_loss", "val_backward_logits_loss"} <= set(result.metrics)
    bilm = keras.saving.load_model(tmp_path / "elmo" / "backbone.keras")
    assert isinstance(bilm, ElmoBiLM) and bilm.character_cnn
    for ours, theirs in zip(bilm.weights, result.model.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    # Both directions' targets: the next and the previous token of every position.
    task = LanguageModelTask()
    run = load_config(
        {**task.sections, "training": TrainingConfig},
        overrides={"model.architecture": "elmo", "data.corpus": str(corpus),
                   "data.vocabulary_size": 200, "data.held_out_documents": 4,
                   "model.sequence_length": 16},
    )  # fmt: skip
    x, y = task.prepare(run).example_fn([0, 1], 0)
    ids, pad = x["token_ids"].numpy(), task.tokenizer.pad_id
    np.testing.assert_array_equal(y["forward_logits"].numpy()[:, :-1], ids[:, 1:])
    np.testing.assert_array_equal(y["backward_logits"].numpy()[:, 1:], ids[:, :-1])
    assert (y["backward_logits"].numpy()[:, 0] == pad).all()

    with pytest.raises(UserInputError, match="--feature-based scalar-mix"):
        export_run(tmp_path / "elmo", "bilm", tmp_path / "saved")
    with pytest.raises(ConfigError, match="its layers serve as features: model.feature_based"):
        finetune(tmp_path / "elmo", tmp_path / "tuned")
    reviews = write_reviews(tmp_path / "reviews.csv", count=48, bad_row=False)
    task, tuned = finetune(
        tmp_path / "elmo", tmp_path / "tuned", **FLAGS, **{"data.train": str(reviews)},
        **{"model.feature_based": "scalar-mix", "model.lstm_units": 8, "training.steps": 2},
    )  # fmt: skip
    assert isinstance(tuned.model.backbone, ElmoBiLM)
    _assert_serves_as_reloaded(
        task, tmp_path / "tuned", tmp_path / "saved", ["the king went", "a river"]
    )
