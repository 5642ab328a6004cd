"""ERNIE's inputs from text: entities at their mentions' first word pieces, `[ENT]`
markers around the typed mention, the window kept around it, and bad targets refused."""

import numpy as np
import pytest

from keras_attn.data import WordPieceTokenizer
from keras_attn.knowledge import Mention
from keras_attn.models import ernie_inputs

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[ENT]", "the", "ice", "cream",
         "gee", "##se", "ate", "a", "lot", "."]  # fmt: skip


def test_entities_sit_at_first_pieces_and_markers_wrap_the_target():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=12)
    text = "The geese ate ice cream."
    mentions = [Mention(4, 9, "goose", "g"), Mention(14, 23, "ice_cream", "i")]
    x = ernie_inputs(tokenizer, [text, text], [mentions, mentions], {"g": 4, "i": 9},
                     targets=[(14, 23), (4, 9)])  # fmt: skip
    ids = {t: i for i, t in enumerate(VOCAB)}
    words = ["[CLS]", "the", "gee", "##se", "ate", "[ENT]", "ice", "cream", "[ENT]", ".", "[SEP]"]
    assert x["token_ids"][0].tolist() == [ids[w] for w in words] + [0]
    assert x["entity_ids"][0].tolist() == [0, 0, 4, 0, 0, 0, 9, 0, 0, 0, 0, 0]
    assert x["marker_positions"].tolist() == [5, 2]
    assert x["entity_ids"][1].tolist()[:8] == [0, 0, 0, 4, 0, 0, 0, 9]  # "[ENT] gee ##se [ENT]"
    assert x["padding_mask"][0].tolist() == [1] * 11 + [0]
    assert not x["segment_ids"].any()
    # Unknown synsets and no targets: no entity, no marker.
    plain = ernie_inputs(tokenizer, [text], [mentions], {"g": 4})
    assert "marker_positions" not in plain and plain["entity_ids"][0].tolist()[6] == 0


def test_a_long_text_keeps_the_window_around_its_target():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=8)
    text = "a lot a lot a lot a lot ice cream a lot a lot"
    start = text.index("ice")
    x = ernie_inputs(tokenizer, [text], [[Mention(start, start + 9, "ice_cream", "i")]],
                     {"i": 3}, targets=[(start, start + 9)])  # fmt: skip
    position = int(x["marker_positions"][0])
    assert x["token_ids"][0, position] == VOCAB.index("[ENT]")
    assert x["token_ids"][0, position + 1] == VOCAB.index("ice")
    assert x["entity_ids"][0, position + 1] == 3 and x["token_ids"][0, -1] == VOCAB.index("[SEP]")


def test_bad_arguments_are_refused():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=8)
    with pytest.raises(ValueError, match="one list of mentions per text"):
        ernie_inputs(tokenizer, ["a"], [], {})
    with pytest.raises(ValueError, match="one target per text"):
        ernie_inputs(tokenizer, ["a"], [[]], {}, targets=[])
    with pytest.raises(ValueError, match="0 <= start < end <= len\\(text\\)"):
        ernie_inputs(tokenizer, ["a lot"], [[]], {}, targets=[(3, 99)])
    with pytest.raises(ValueError, match="cover a word piece"):
        ernie_inputs(tokenizer, ["a  lot"], [[]], {}, targets=[(1, 2)])
    with pytest.raises(ValueError, match="marker '\\[E\\]' in the tokenizer's vocabulary"):
        ernie_inputs(tokenizer, ["a"], [[]], {}, targets=[(0, 1)], marker="[E]")
    empty = ernie_inputs(tokenizer, [], [], {}, targets=[])
    assert empty["token_ids"].shape == (0, 8) and np.array_equal(empty["marker_positions"], [])
