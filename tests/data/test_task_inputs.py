"""Task inputs: sub-word label alignment, answer spans under truncation, choice packing."""

import pytest
import tensorflow as tf

from keras_attn.data import (
    SpanQAData,
    TaggingData,
    WordPieceTokenizer,
    multiple_choice_inputs,
    span_qa_inputs,
    tagging_inputs,
)

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "who",
    "met",
    "in",
    "paris",
    "zoe",
    "emile",
    "em",
    "##ile",
    "?",
    ".",
    "new",
    "york",
    "##er",
    "##s",
    "sing",
]


def test_tagging_labels_only_first_pieces_and_truncates():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=8)
    words = tf.ragged.constant(
        [["New", "Yorkers", "sing"], ["Émile", "met", "Zoé", "in", "Paris", "..."]]
    )
    tags = tf.ragged.constant([[1, 2, 0], [3, 0, 3, 0, 4, 0]])
    out = {k: v.numpy() for k, v in tagging_inputs(tokenizer, words, tags).items()}
    # "Yorkers" -> york ##er ##s: one label, on "york".
    assert out["token_ids"][0].tolist() == [2, 15, 16, 17, 18, 19, 3, 0]
    assert out["labels"][0].tolist() == [0, 1, 2, 0, 0, 0, 0, 0]
    assert out["sample_weight"][0].tolist() == [0, 1, 1, 0, 0, 1, 0, 0]
    assert out["word_ids"][0].tolist() == [-1, 0, 1, 1, 1, 2, -1, -1]
    # Accents stripped by the uncased tokenizer; "..." is three pieces; six pieces fit.
    assert out["token_ids"][1].tolist() == [2, 10, 6, 9, 7, 8, 14, 3]
    assert out["word_ids"][1].tolist() == [-1, 0, 1, 2, 3, 4, 5, -1]
    assert out["labels"][1].tolist() == [0, 3, 0, 3, 0, 4, 0, 0]
    assert out["padding_mask"][1].tolist() == [1] * 8
    # Without tags: inputs and word ids only.
    assert set(tagging_inputs(tokenizer, [["sing"]])) == {
        "token_ids",
        "segment_ids",
        "padding_mask",
        "word_ids",
    }


def test_tagging_inputs_from_tagging_data():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=6)
    data = TaggingData([["Paris", "sing"], ["Zoe"]], [[2, 0], [1]], ["O", "B-PER", "B-LOC"])
    words, tags = next(iter(data.dataset().batch(2)))
    out = tagging_inputs(tokenizer, words, tags)
    assert out["labels"].numpy().tolist() == [[0, 2, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0]]
    assert out["sample_weight"].numpy().sum() == 3


def test_tagging_rejects_tags_of_another_shape():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=8)
    with pytest.raises(tf.errors.InvalidArgumentError, match="one tag per word"):
        tagging_inputs(tokenizer, [["new", "york"]], [[1]])


def test_span_answers_multibyte_truncated_and_impossible():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=10)
    context = "Zoé met Émile in Paris."
    encoded = context.encode()
    start = encoded.index("Émile".encode())
    paris = encoded.index(b"Paris")
    out = {
        k: v.numpy()
        for k, v in span_qa_inputs(
            tokenizer,
            ["Who met?", "Who met?", "Who met?"],
            [context] * 3,
            answer_starts=[start, paris, -1],
            answer_ends=[start + len("Émile".encode()), paris + 5, -1],
        ).items()
    }
    # [CLS] who met ? [SEP] zoe met emile in [SEP]: four context pieces fit.
    assert out["token_ids"][0].tolist() == [2, 5, 6, 13, 3, 9, 6, 10, 7, 3]
    assert out["context_mask"][0].tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1, 0]
    assert (out["start_positions"][0], out["end_positions"][0], out["answer_in_window"][0]) == (
        7,
        7,
        True,
    )
    s, e = out["token_starts"][0, 7], out["token_ends"][0, 7]
    assert encoded[s:e].decode() == "Émile"
    # "Paris" was cut off: points at [CLS], flagged; the impossible one is at [CLS], not flagged.
    assert (out["start_positions"][1], out["end_positions"][1], out["answer_in_window"][1]) == (
        0,
        0,
        False,
    )
    assert (out["start_positions"][2], out["end_positions"][2], out["answer_in_window"][2]) == (
        0,
        0,
        True,
    )
    assert out["token_starts"][0, :5].tolist() == [-1] * 5


def test_span_answers_spanning_pieces_and_question_limit():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=16)
    context = "zoe met emiles ."
    out = span_qa_inputs(
        tokenizer, ["who who who who met ?"], [context], [8], [14], max_question_length=2
    )
    # Question cut to two pieces: [CLS] who who [SEP] zoe met emile ##s . [SEP]
    assert out["token_ids"].numpy()[0].tolist() == [2, 5, 5, 3, 9, 6, 10, 18, 14, 3] + [0] * 6
    first, last = int(out["start_positions"][0]), int(out["end_positions"][0])
    assert (first, last) == (6, 7)
    assert (
        context.encode()[out["token_starts"].numpy()[0, first] : out["token_ends"].numpy()[0, last]]
        == b"emiles"
    )


def test_span_qa_inputs_from_span_qa_data():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=12)
    data = SpanQAData(
        ["1", "2"],
        ["who met?", "who?"],
        ["zoe met emile", "zoe sing"],
        ["emile", ""],
        [8, -1],
        [13, -1],
    )
    batch = next(iter(data.dataset().batch(2)))
    out = span_qa_inputs(
        tokenizer, batch["question"], batch["context"], batch["answer_start"], batch["answer_end"]
    )
    assert out["start_positions"].numpy().tolist() == [7, 0] and out[
        "end_positions"
    ].numpy().tolist() == [7, 0]


def test_multiple_choice_packs_every_pair():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=7)
    out = multiple_choice_inputs(
        tokenizer, ["zoe met", "who sing"], [["emile", "paris"], ["new york", "?"]]
    )
    assert out["token_ids"].shape == (2, 2, 7)
    assert out["token_ids"].numpy()[1, 0].tolist() == [2, 5, 19, 3, 15, 16, 3]
    assert out["segment_ids"].numpy()[1, 0].tolist() == [0, 0, 0, 0, 1, 1, 1]
    with pytest.raises(ValueError, match="Expected `choices` of shape"):
        multiple_choice_inputs(tokenizer, ["a"], ["b", "c"])
