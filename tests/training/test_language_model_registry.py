"""Language models come from the registry: an architecture registered from this test
file (a bigram model, nothing of the package's) trains through `keras-attn lm` as the
package's own do, and the training code names no architecture."""

import json
import pathlib
import subprocess

import keras
import numpy as np
import pytest

from keras_attn.models import registry
from tests.training.runs import run_keras_attn, write_corpus

ROOT = pathlib.Path(__file__).parents[2]


@keras.saving.register_keras_serializable(package="tests_bigram")
class BigramLanguageModel(keras.Model):
    """Each token's embedding predicts the next token: no attention, no context."""

    def __init__(self, vocabulary_size, hidden_dim=16, **kwargs):
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        hidden = keras.layers.Embedding(vocabulary_size, hidden_dim)(token_ids)
        logits = keras.layers.Dense(vocabulary_size, name="logits")(hidden)
        super().__init__(token_ids, logits, **kwargs)
        self.vocabulary_size, self.hidden_dim = vocabulary_size, hidden_dim

    def get_config(self):
        return {"vocabulary_size": self.vocabulary_size, "hidden_dim": self.hidden_dim}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def compile(self, optimizer="adam", **kwargs):
        kwargs.setdefault("loss", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        super().compile(optimizer=optimizer, **kwargs)


def _build(settings, tokenizer):
    return BigramLanguageModel(tokenizer.vocabulary_size, hidden_dim=settings.hidden_dim)


@pytest.fixture
def bigram():
    entry = registry.register_language_model(
        registry.LanguageModel("bigram", _build, generates=False)
    )
    yield entry
    registry._LANGUAGE_MODELS.pop("bigram")  # other tests see the package's alone


def test_an_architecture_registered_outside_the_package_trains_through_the_cli(bigram, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt")
    run_keras_attn(
        ["lm", "--architecture", "bigram", "--corpus", corpus, "--vocabulary-size", "200",
         "--held-out-documents", "4", "--hidden-dim", "16", "--sequence-length", "16",
         "--batch-size", "8", "--steps", "40", "--steps-per-epoch", "20",
         "--learning-rate", "0.01", "--histogram-every", "0", "--output", tmp_path / "run",
         "--verbose", "0"]
    )  # fmt: skip
    model = keras.saving.load_model(tmp_path / "run" / "model.keras")
    assert type(model) is BigramLanguageModel
    assert not (tmp_path / "run" / "backbone.keras").exists()  # not a features model
    vocabulary = [v for v in (tmp_path / "run" / "vocab.txt").read_text().split("\n") if v]
    assert model.vocabulary_size == len(vocabulary)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    # It learned the corpus's bigrams: held out, well below a uniform guess's loss.
    assert metrics["val_loss"] < np.log(len(vocabulary)) - 0.4, metrics
    assert np.isfinite(model.predict(np.array([[5, 6, 7]]), verbose=0)).all()


def test_an_unknown_architecture_names_the_registered_ones(tmp_path, capsys):
    from keras_attn.cli.main import main

    corpus = write_corpus(tmp_path / "corpus.txt")
    with pytest.raises(SystemExit):
        main(["lm", "--architecture", "bigram", "--corpus", str(corpus), "--output",
              str(tmp_path / "run")])  # fmt: skip
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "model.architecture" in line and "'elmo', 'gpt', 'llama', 'transformer_xl'" in line, line
    assert not (tmp_path / "run").exists()


def test_training_names_no_architecture():
    found = subprocess.run(
        ["grep", "-rn", "architecture ==", str(ROOT / "keras_attn" / "training")],
        capture_output=True,
        text=True,
    )
    assert found.stdout == "", found.stdout


def test_the_llama_architecture_refuses_options_it_would_leave_unused():
    """`keras-attn lm --architecture llama` builds Llama's own blocks: a post-LN, another
    score or GPT's position embeddings are named in the error, not ignored."""
    from keras_attn.errors import UserInputError
    from keras_attn.training.task_configs import LanguageModelConfig

    tokenizer = type("Tokenizer", (), {"vocabulary_size": 50, "pad_id": 0})()
    entry = registry.language_model("llama")
    settings = dict(architecture="llama", num_layers=1, hidden_dim=16, intermediate_dim=32)
    model = entry.build(LanguageModelConfig(**settings, num_key_value_heads=2), tokenizer)
    assert type(model).__name__ == "LlamaLanguageModel" and model.num_key_value_heads == 2
    for option, value in (("norm_first", False), ("score", "additive")):
        with pytest.raises(UserInputError, match=f"model.{option}"):
            entry.build(LanguageModelConfig(**settings, **{option: value}), tokenizer)
    with pytest.raises(UserInputError, match="model.position_embedding"):
        entry.build(LanguageModelConfig(**settings, position_embedding="rotary"), tokenizer)
