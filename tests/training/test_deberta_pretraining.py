"""`keras-attn pretrain --objective deberta`: a `DebertaV3Backbone` of the preset's size
learns masked LM through the enhanced mask decoder, the run resumes, backbone.keras is
the DeBERTa backbone with the run's WordPiece vocabulary beside it; `finetune` on that
folder builds DeBERTa's heads with that vocabulary, `export` serves them and the
answers; settings DeBERTa does not have are named."""

import keras
import numpy as np
import pytest

from keras_attn.errors import UserInputError
from keras_attn.models import (
    DebertaV3Backbone,
    DebertaV3Classifier,
    DebertaV3MaskedLM,
    DebertaV3SpanQA,
)
from keras_attn.training.tasks import BertPretrainingTask
from tests.models import end_to_end
from tests.training.runs import PRETRAIN_FLAGS, train_task, write_corpus

FLAGS = {**PRETRAIN_FLAGS, "model.objective": "deberta"}


def _run(output, flags):
    return train_task(BertPretrainingTask(), output, flags)


@pytest.mark.slow
@pytest.mark.eager  # a few steps each run; traced steps: tests/training/test_trainer.py
def test_deberta_pretrains_resumes_fine_tunes_and_exports(tmp_path):
    from keras_attn.data import WordPieceTokenizer

    corpus = write_corpus(tmp_path / "corpus.txt", documents=16)
    flags = {**FLAGS, "data.corpus": str(corpus)}
    _run(tmp_path / "run", {**flags, "training.steps": 2})
    task, result = _run(tmp_path / "run", flags)
    assert (result.steps, result.resumed_from) == (4, 2)
    assert {"loss", "mlm_logits_accuracy", "val_loss"} <= set(result.history)
    assert np.isfinite(result.history["loss"]).all()
    pretrainer = keras.saving.load_model(tmp_path / "run" / "model.keras")
    assert isinstance(pretrainer, DebertaV3MaskedLM) and pretrainer.enhanced_mask_decoder
    backbone = keras.saving.load_model(tmp_path / "run" / "backbone.keras")
    assert isinstance(backbone, DebertaV3Backbone) and backbone.hidden_dim == 128
    assert (tmp_path / "run" / "vocab.txt").is_file()

    _, tuned, _, _, _ = end_to_end.classify_export_and_serve(
        tmp_path, tmp_path / "run", ["a good film", "a dull plot"], "deberta"
    )
    assert isinstance(tuned.model, DebertaV3Classifier)
    assert (tmp_path / "tuned" / "vocab.txt").is_file()
    assert not (tmp_path / "tuned" / "spm.model").exists()
    end_to_end.answer_export_and_serve(
        tmp_path,
        tmp_path / "run",
        DebertaV3SpanQA,
        lambda folder: WordPieceTokenizer(folder / "vocab.txt", sequence_length=32),
    )


@pytest.mark.parametrize("key, value", [("norm_first", True), ("score", "additive")])
def test_settings_deberta_does_not_have_are_named(tmp_path, key, value):
    corpus = write_corpus(tmp_path / "corpus.txt", documents=8)
    with pytest.raises(UserInputError, match=f"model.{key}: expected"):
        _run(tmp_path / "run", {**FLAGS, "data.corpus": str(corpus), f"model.{key}": value})


def test_a_backbone_without_either_tokenizer_names_both(tmp_path):
    from keras_attn.training.config import ConfigError
    from keras_attn.training.tasks.text_classification import load_backbone

    DebertaV3Backbone.from_size(
        "tiny", vocabulary_size=50, max_sequence_length=16, position_buckets=8
    ).save(tmp_path / "backbone.keras")
    with pytest.raises(ConfigError, match=r"\(spm.model, or vocab.txt\); .* has no spm.model"):
        load_backbone(str(tmp_path), sequence_length=16)


def test_a_backbone_pretrained_here_converts_without_its_wordpiece_vocabulary(tmp_path):
    """`keras-attn convert` writes the Hugging Face folder of the model alone: a
    `deberta-v2` folder's tokenizer is SentencePiece, not the run's vocab.txt."""
    from keras_attn.cli import main

    run = tmp_path / "run"
    run.mkdir()
    DebertaV3Backbone.from_size(
        "tiny", vocabulary_size=7, max_sequence_length=16, position_buckets=8
    ).save(run / "backbone.keras")
    (run / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ngood\nfilm\n")
    main.main(["convert", str(run / "backbone.keras"), str(tmp_path / "hf")])
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [
        "config.json",
        "model.safetensors",
    ]
