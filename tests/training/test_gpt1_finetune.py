"""`keras-attn finetune --backbone LM_RUN`: a `keras-attn lm` GPT run fine-tuned as GPT-1
was. The start, delimiter and extract tokens join the vocabulary and the embedding (the
language model's own logits unchanged), pairs are packed with the delimiter, the
auxiliary loss is there at λ > 0 and gone at 0, and the run exports and serves."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli.export import export_run
from keras_attn.cli.main import main
from keras_attn.models import GPTFineTuner
from keras_attn.training.config import ConfigError
from tests.export.test_saved_model import tf_only
from tests.models.end_to_end import finetune
from tests.training.runs import backbone_folder, write_corpus, write_reviews

FLAGS = {"data.text_column": "review", "data.label_column": "sentiment", "training.steps": 3}


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt")
    corpus = write_corpus(folder / "corpus.txt")
    flags = ["--corpus", str(corpus), "--vocabulary-size", "200", "--held-out-documents", "4",
             "--num-layers", "1", "--hidden-dim", "32", "--intermediate-dim", "64",
             "--sequence-length", "32", "--batch-size", "8", "--steps", "3",
             "--histogram-every", "0", "--samples-every", "0", "--jit-compile", "false",
             "--verbose", "0"]  # fmt: skip
    main(["lm", *flags, "--output", str(folder / "lm")])
    keras.backend.clear_session()
    return folder / "lm"


@pytest.mark.slow
def test_a_gpt_run_fine_tunes_with_gpt1_s_tokens_and_serves(lm_run, tmp_path):
    lm = keras.saving.load_model(lm_run / "model.keras")
    reviews = write_reviews(tmp_path / "reviews.csv", count=48, bad_row=False)
    task, result = finetune(lm_run, tmp_path / "run", **FLAGS, **{"data.train": str(reviews)})
    model = result.model
    assert isinstance(model, GPTFineTuner) and model.lm_weight == 0.5
    assert model.backbone.vocabulary_size == lm.vocabulary_size + 3
    vocabulary = (tmp_path / "run" / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocabulary[-3:] == ["[START]", "[DELIM]", "[EXTRACT]"]
    assert model.extract_token_id == len(vocabulary) - 1 == task.tokenizer.extract_id
    assert {"val_logits_accuracy", "val_lm_logits_loss"} <= set(result.metrics)
    # The batches: GPT-1's packing, the class, and each position's next token.
    x, y = task.training_data().example_fn(np.arange(4), 0)
    ids = x.numpy()
    assert (ids[:, 0] == task.tokenizer.start_id).all()
    assert ((ids == task.tokenizer.extract_id).sum(axis=1) == 1).all()
    np.testing.assert_array_equal(y["lm_logits"].numpy()[:, :-1], ids[:, 1:])

    version = export_run(tmp_path / "run", "gpt1", tmp_path / "saved")
    texts = ["the film was good", "awful plot"]
    packed = task.tokenizer(tf.constant(texts))
    reloaded = keras.saving.load_model(tmp_path / "run" / "model.keras")
    expected = tf.nn.softmax(reloaded(packed["token_ids"].numpy())["logits"], -1).numpy()
    served = tf_only(version, {"serving_default": {"text": texts}})["serving_default"]
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)


def test_lambda_zero_trains_the_task_alone_and_pairs_get_the_delimiter(lm_run, tmp_path):
    pairs = tmp_path / "pairs.csv"
    rows = ["premise,hypothesis,label"] + [
        f"the king went,{'a river' if i % 2 else 'the king'},{'no' if i % 2 else 'yes'}"
        for i in range(24)
    ]
    pairs.write_text("\n".join(rows) + "\n", encoding="utf-8")
    task, result = finetune(
        lm_run, tmp_path / "run", **{"data.train": str(pairs), "data.text_column": "premise",
                                     "data.text_pair_column": "hypothesis",
                                     "model.lm_weight": 0.0, "training.steps": 2},
    )  # fmt: skip
    assert result.model.lm_weight == 0.0 and "val_lm_logits_loss" not in result.metrics
    x, _ = task.training_data().example_fn(np.arange(2), 0)
    assert ((x.numpy() == task.tokenizer.delimiter_id).sum(axis=1) == 1).all()


@pytest.mark.slow  # 5 s on the 2 busy cores: out of `make test-fast`
def test_what_cannot_be_fine_tuned_is_a_configuration_error(lm_run, tmp_path):
    with pytest.raises(ConfigError, match="model.lm_weight.*0.5 \\(unused\\) with a BertBackbone"):
        finetune(backbone_folder(tmp_path / "bert"), tmp_path / "a", **{"model.lm_weight": 0.2})
    conll = tmp_path / "tags.conll"
    conll.write_text("".join("the O\nking B-PER\n\n" for _ in range(8)), encoding="utf-8")
    with pytest.raises(ConfigError, match="data.task.*\\['classification'\\] with a GPTLanguage"):
        finetune(lm_run, tmp_path / "b", **{"data.task": "tagging", "data.train": str(conll)})
    reviews = write_reviews(tmp_path / "reviews.csv", count=24, bad_row=False)
    finetune(lm_run, tmp_path / "tuned", **{**FLAGS, "training.steps": 1},
             **{"data.train": str(reviews)})  # fmt: skip
    (tmp_path / "tuned" / "vocab.txt").rename(tmp_path / "tuned" / "kept.txt")
    with pytest.raises(ConfigError, match="model.keras of a language model run.*GPTFineTuner"):
        finetune(tmp_path / "tuned", tmp_path / "c", **FLAGS)
