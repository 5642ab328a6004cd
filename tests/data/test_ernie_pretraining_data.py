"""ERNIE's pre-training data in the graph: each piece's entity at its mention's first
piece, sentence pairs that carry them trimmed as their pieces are, and dEA's corruption
and targets (every linked piece names its own entity among the row's)."""

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import (
    GraphLinker,
    MaskedLMMasker,
    SentencePairSampler,
    WordPieceTokenizer,
    dea_corruption,
    ernie_pretraining_example,
    piece_entities,
)
from keras_attn.knowledge import EntityLinker, WordNet

pytestmark = pytest.mark.xdist_group("wordnet")
IDS = {"01855672-n": 1, "07614500-n": 2, "02084071-n": 3}  # goose, ice cream, dog
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "gee", "##se", "ice", "cream", "dog",
         "##s", "ran", "the", "."]  # fmt: skip


@pytest.fixture(scope="module")
def linker():
    return GraphLinker(EntityLinker(WordNet.load(), synsets=IDS), IDS)


@pytest.mark.slow
def test_pieces_and_pairs_carry_their_entities(linker):
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=10)
    texts = ["the geese ran .", "dogs ice cream", ""]
    entities = piece_entities(tokenizer, linker, texts)
    assert entities.to_list() == [[0, 1, 0, 0, 0], [3, 0, 2, 0], []]
    assert entities.row_lengths().numpy().tolist() == [5, 4, 0]  # as tokenize gives them
    documents = [["the geese ran .", "dogs ice cream"], ["ice cream .", "the dogs ran ."]]
    sampler = SentencePairSampler(tokenizer, documents, linker=linker)
    pair = sampler(tf.constant([0, 1]), tf.constant([1, 2]))
    ids, linked = pair["token_ids"].numpy(), pair["entity_ids"].numpy()
    assert linked.shape == ids.shape and linked.any()
    first_pieces = {VOCAB.index("gee"): 1, VOCAB.index("ice"): 2, VOCAB.index("dog"): 3}
    for row in range(2):
        for token, entity in zip(ids[row], linked[row], strict=True):
            assert entity == first_pieces.get(int(token), 0)


def test_dea_corruption_targets_and_rates():
    rng = np.random.default_rng(0)
    entity_ids = rng.integers(0, 4, (300, 40)) * 5
    out = {k: v.numpy() for k, v in dea_corruption(entity_ids, 30, seed=[4, 5]).items()}
    linked = entity_ids > 0
    picked = np.take_along_axis(out["entity_candidates"], out["dea_labels"], axis=1)
    assert np.array_equal(picked[linked], entity_ids[linked])  # its own entity
    assert np.array_equal(out["dea_weights"] > 0, linked)
    for row in range(5):  # candidates: each entity once, at its first position
        nonzero = out["entity_candidates"][row][out["entity_candidates"][row] > 0]
        assert list(nonzero) == list(dict.fromkeys(entity_ids[row][linked[row]]))
    removed = linked & (out["entity_ids"] == 0)
    assert abs(removed.sum() / linked.sum() - 0.15) < 0.015
    replaced = linked & (out["entity_ids"] != entity_ids) & ~removed
    assert abs(replaced.sum() / linked.sum() - 0.05 * 29 / 30) < 0.01
    again = dea_corruption(entity_ids, 30, seed=[4, 5])["entity_ids"].numpy()
    assert np.array_equal(again, out["entity_ids"])


def test_the_example_feeds_the_pretrainer(linker):
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=12)
    documents = [["the geese ran .", "dogs ice cream"], ["ice cream .", "the dogs ran ."]]
    sampler = SentencePairSampler(tokenizer, documents, linker=linker)
    masker = MaskedLMMasker(len(VOCAB), 4, [0, 1, 2, 3, 4], max_predictions_per_seq=2)
    x, y, w = ernie_pretraining_example(sampler, masker)(tf.constant([0, 1]), tf.constant([7, 8]))
    assert x["entity_candidates"].shape == x["entity_ids"].shape == (2, 12)
    assert y["dea_logits"].shape == w["dea_logits"].shape == (2, 12)
    single, _, _ = ernie_pretraining_example(sampler, masker)(tf.constant(0), tf.constant([7, 8]))
    assert single["entity_ids"].shape == (12,)
    with pytest.raises(ValueError, match="with a `linker`"):
        ernie_pretraining_example(SentencePairSampler(tokenizer, documents), masker)
