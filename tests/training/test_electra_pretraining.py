"""`keras-attn pretrain --objective electra`: a generator a quarter as wide, on the
backbone's embeddings; the run resumes; backbone.keras is the discriminator; bad
settings are named."""

import keras
import numpy as np
import pytest

from keras_attn.data import SentencePairSampler, WordPieceTokenizer
from keras_attn.models import BertBackbone, ElectraPretrainer
from keras_attn.models.bert.electra_generators import electra_generator
from keras_attn.training import TrainingConfig, load_config, train
from keras_attn.training.config import ConfigError
from keras_attn.training.tasks import BertPretrainingTask
from tests.training.runs import write_corpus

FLAGS = {
    "model.objective": "electra",
    "model.sequence_length": 32,
    "data.vocabulary_size": 200,
    "data.held_out_documents": 4,
    "training.batch_size": 8,
    "training.steps": 12,
    "training.steps_per_epoch": 6,
    "training.checkpoint_every": 6,
    "training.validation_steps": 2,
    "training.attention_every": 0,
    "training.histogram_every": 0,
    "training.learning_rate": 0.001,
}


def _run(corpus, output, **overrides):
    task = BertPretrainingTask()
    run = load_config(
        {**task.sections, "training": TrainingConfig},
        overrides={**FLAGS, "data.corpus": str(corpus), **overrides},
    )
    return train(task, run, output, verbose=0)


@pytest.mark.slow
@pytest.mark.eager  # a few steps each run; traced steps: tests/training/test_trainer.py
def test_electra_pretraining_runs_resumes_and_leaves_the_discriminator(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", documents=16)
    _run(corpus, tmp_path / "run", **{"training.steps": 6})
    result = _run(corpus, tmp_path / "run")
    assert (result.steps, result.resumed_from) == (12, 6)
    assert {"mlm_accuracy", "rtd_accuracy", "replaced", "val_rtd_loss"} <= set(result.history)
    assert 0.0 < result.history["replaced"][-1] < 1.0
    pretrainer = keras.saving.load_model(tmp_path / "run" / "model.keras")
    assert isinstance(pretrainer, ElectraPretrainer)
    generator, discriminator = pretrainer.generator, pretrainer.discriminator
    assert generator.token_embedding is discriminator.token_embedding
    assert (generator.hidden_dim, generator.num_heads, generator.num_layers) == (32, 1, 2)
    backbone = keras.saving.load_model(tmp_path / "run" / "backbone.keras")
    assert isinstance(backbone, BertBackbone) and backbone.hidden_dim == 128
    for mine, theirs in zip(backbone.weights, discriminator.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


def test_the_sampler_without_a_sentence_objective_keeps_the_order():
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "a", "b", "c", "d"]
    tokenizer = WordPieceTokenizer(vocabulary, sequence_length=16)
    documents = [["a .", "b .", "c .", "d ."], ["a .", "c .", "d ."]]  # words in order

    def in_order(objective):
        sampler = SentencePairSampler(tokenizer, documents, objective=objective)
        anchors = np.tile(np.arange(len(sampler.anchors)), 8)
        pairs = sampler(anchors, seed=[3, 4])
        ordered = []
        for row, segment in zip(
            pairs["token_ids"].numpy(), pairs["segment_ids"].numpy(), strict=True
        ):
            words = row > 5
            ordered.append(row[words & (segment == 0)].max() < row[words & (segment == 1)].min())
        return pairs["label"].numpy(), ordered

    labels, ordered = in_order("none")
    assert not labels.any() and all(ordered)  # B always follows A in its document
    labels, ordered = in_order("sop")
    assert labels.any() and not all(ordered)  # the check can fail: SOP swaps half


def test_generator_sizes_and_bad_settings_are_named(tmp_path):
    discriminator = BertBackbone.from_size("small", vocabulary_size=100)
    generator = electra_generator(discriminator, 0.5)
    assert (generator.hidden_dim, generator.num_heads, generator.intermediate_dim) == (
        256,
        4,
        1024,
    )
    assert generator.token_embedding.output_dim == discriminator.hidden_dim
    for key, value in (("model.generator_fraction", 1.5), ("model.rtd_weight", 0.0)):
        with pytest.raises(ConfigError, match=key):
            _run(tmp_path / "missing.txt", tmp_path / "never", **{key: value})
    assert not (tmp_path / "never").exists()


def test_electra_examples_feed_the_pretrainer(tmp_path):
    from keras_attn.data import (
        MaskedLMMasker,
        electra_pretraining_example,
        fixed_batches,
        read_corpus,
    )
    from tests.training.runs import VOCABULARY

    documents = read_corpus(write_corpus(tmp_path / "corpus.txt", documents=6)).documents
    tokenizer = WordPieceTokenizer(VOCABULARY, sequence_length=24)
    sampler = SentencePairSampler(tokenizer, documents, objective="none")
    masker = MaskedLMMasker(
        tokenizer.vocabulary_size,
        tokenizer.mask_id,
        tokenizer.special_token_ids,
        max_predictions_per_seq=4,
    )
    example = electra_pretraining_example(sampler, masker)
    x = next(iter(fixed_batches(8, example, batch_size=8, batched=True)))
    x = {k: v.numpy() for k, v in x.items()}
    assert sorted(x) == [
        "masked_ids",
        "masked_positions",
        "masked_weights",
        "padding_mask",
        "segment_ids",
        "token_ids",
    ]
    # Every [MASK] of the input sits at a real masked position: with the targets put
    # back, none is left.
    assert np.any(x["token_ids"] == tokenizer.mask_id)
    original = x["token_ids"].copy()
    for row in range(len(original)):
        real = x["masked_weights"][row] > 0
        original[row, x["masked_positions"][row][real]] = x["masked_ids"][row][real]
    assert not np.any(original == tokenizer.mask_id)
    discriminator = BertBackbone(tokenizer.vocabulary_size, 1, 2, 16, 32, max_sequence_length=24)
    generator = BertBackbone(
        tokenizer.vocabulary_size, 1, 1, 8, 16, max_sequence_length=24, embedding_dim=16
    )
    outputs = ElectraPretrainer(generator, discriminator, seed=0)(x)
    labels = np.asarray(outputs["rtd_labels"])
    assert labels.shape == x["token_ids"].shape and not np.any(labels[x["padding_mask"] == 0])


@pytest.mark.slow  # over 10 s: left out of `make test-fast`
def test_the_uniform_control_learns_and_the_diagnostics_are_reported(tmp_path):
    """Uniform replacements are told by the pieces alone: the discriminator ranks
    them within a hundred steps; the frequent pieces are the corpus's."""
    from keras_attn.training.tasks.pretraining import piece_counts

    corpus = write_corpus(tmp_path / "corpus.txt", documents=16)
    result = _run(
        corpus,
        tmp_path / "run",
        **{
            "model.uniform_generator": True,
            "model.frequent_pieces": 10,
            "training.steps": 100,
            "training.steps_per_epoch": 100,
            "training.learning_rate": 0.003,
        },
    )
    assert result.metrics["val_rtd_auc"] >= 0.9, result.metrics
    assert result.metrics["val_rtd_recall"] > 0.5, result.metrics
    assert {"val_frequent_rtd_auc", "val_frequent_rtd_recall"} <= set(result.metrics)
    pretrainer = keras.saving.load_model(tmp_path / "run" / "model.keras")
    vocabulary = (tmp_path / "run" / "vocab.txt").read_text().split("\n")
    tokenizer = WordPieceTokenizer([v for v in vocabulary if v], sequence_length=32)
    from keras_attn.data import read_corpus
    from keras_attn.training.tasks.corpus import split_corpus

    counts = piece_counts(tokenizer, split_corpus(_settings(corpus).data, 0)[0])
    assert sorted(counts[pretrainer.frequent_ids]) == sorted(np.sort(counts)[-10:])
    assert not set(pretrainer.frequent_ids) & set(tokenizer.special_token_ids)
    assert read_corpus  # the corpus reader the task uses


def _settings(corpus, **overrides):
    task = BertPretrainingTask()
    return load_config(
        {**task.sections, "training": TrainingConfig},
        overrides={**FLAGS, "data.corpus": str(corpus), **overrides},
    )


def test_electra_masks_as_google_and_rates_are_checked(tmp_path):
    """85% of the selected tokens become [MASK], the rest stay as they were: none is a
    random piece (BERT's 10%), which would hand the discriminator free replacements."""
    corpus = write_corpus(tmp_path / "corpus.txt", documents=16)
    task = BertPretrainingTask()
    data = task.prepare(_settings(corpus))
    from keras_attn.data import fixed_batches

    x = next(iter(fixed_batches(64, data.example_fn, batch_size=64, batched=True)))
    x = {k: v.numpy() for k, v in x.items()}
    from tests.models.bert.test_electra_diagnostics import at_real_predictions

    shown = at_real_predictions(x["token_ids"], x)
    masked = shown == task.tokenizer.mask_id
    kept = x["masked_ids"][x["masked_weights"] > 0]
    assert np.all(shown[~masked] == kept[~masked])  # kept, never random
    assert 0.75 < masked.mean() < 0.95
    with pytest.raises(ConfigError, match="model.mask_token_rate"):
        task.prepare(_settings(corpus, **{"model.mask_token_rate": 0.95, "model.objective": "nsp"}))
