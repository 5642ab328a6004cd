"""`RobertaTokenizer` equals `transformers`' `RobertaTokenizer` on a byte-level BPE
trained here (accents, emoji, CJK, long and unseen words; single texts and pairs, cut
to length), in eager code and in the graph; its files load back in both."""

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.models.roberta import RobertaTokenizer

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Café naïve résumé — déjà vu, señor!",
    "Emoji 😀🎉 and 👍🏽 here, ❤️ there",
    "antidisestablishmentarianism and supercalifragilistic words",
    "Ünïcödé ÅÆØ straße 中文字符 日本語のテキスト",
]
PROBES = [
    "The quick brown fox.",
    "Café naïve — déjà vu!",
    "Emoji 😀🎉 👍🏽 ❤️",
    "antidisestablishmentarianismxyzzyplughfrobnicate",
    "  two  spaces\tand a tab",
    "Ünïcödé 中文 日本語 straße",
    "unseen Ωmega ☃ snowman ₿",
    "",
]


def vocabulary_folder(folder):
    """A small byte-level BPE trained with `tokenizers`, with RoBERTa's special tokens."""
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(
        CORPUS * 10,
        vocab_size=400,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    folder.mkdir(parents=True, exist_ok=True)
    trainer.save_model(str(folder))
    return folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return vocabulary_folder(tmp_path_factory.mktemp("roberta_vocabulary"))


def _reference(folder, length):
    import transformers

    return lambda text, pair=None: transformers.RobertaTokenizer.from_pretrained(folder)(
        text, pair, truncation=True, max_length=length, padding="max_length"
    )


@pytest.mark.parametrize(
    "length", [64, *(pytest.param(n, marks=pytest.mark.slow) for n in (13, 12))]
)  # trimmed to an odd and an even budget: about 10 s each, left out of `make test-fast`
def test_pieces_and_packing_equal_transformers(folder, length):
    tokenizer = RobertaTokenizer.from_folder(folder, sequence_length=length)
    reference = _reference(folder, length)
    ours = tokenizer(tf.constant(PROBES))
    expected = reference(PROBES)
    np.testing.assert_array_equal(ours["token_ids"], expected["input_ids"])
    np.testing.assert_array_equal(ours["padding_mask"], expected["attention_mask"])
    assert not np.any(ours["segment_ids"])
    pairs = list(reversed(PROBES))
    ours = tokenizer(tf.constant(PROBES), tf.constant(pairs))
    expected = reference(PROBES, pairs)
    np.testing.assert_array_equal(ours["token_ids"], expected["input_ids"])
    np.testing.assert_array_equal(ours["padding_mask"], expected["attention_mask"])

    @tf.function
    def in_the_graph(text, pair):
        return tokenizer(text, pair)

    graph = in_the_graph(tf.constant(PROBES), tf.constant(pairs))
    np.testing.assert_array_equal(graph["token_ids"], ours["token_ids"])


def test_detokenize_gives_the_text_back_and_files_load_in_transformers(folder, tmp_path):
    import transformers

    tokenizer = RobertaTokenizer.from_folder(folder, sequence_length=64)
    ids = tokenizer(tf.constant(PROBES))["token_ids"]
    assert tokenizer.detokenize(ids) == PROBES
    assert tokenizer.vocabulary[tokenizer.mask_id] == "<mask>"
    assert tokenizer.vocabulary_size == len(transformers.RobertaTokenizer.from_pretrained(folder))
    written = tokenizer.save_pretrained(tmp_path / "written")
    loaded = transformers.AutoTokenizer.from_pretrained(written)
    assert type(loaded).__name__ == "RobertaTokenizer"
    theirs = loaded(PROBES)["input_ids"]
    assert theirs == [row[: len(x)] for row, x in zip(ids.numpy().tolist(), theirs, strict=True)]
    again = RobertaTokenizer.from_folder(written, sequence_length=64)
    np.testing.assert_array_equal(again(tf.constant(PROBES))["token_ids"], ids)


def test_bad_vocabularies_and_lengths_are_named(folder, tmp_path):
    with pytest.raises(ValueError, match="Missing: \\['<mask>'\\]"):
        RobertaTokenizer({"<s>": 0, "<pad>": 1, "</s>": 2, "a": 3}, [])
    with pytest.raises(ValueError, match="sequence_length"):
        RobertaTokenizer.from_folder(folder, sequence_length=3)
    with pytest.raises(FileNotFoundError, match="Missing: merges.txt"):
        (tmp_path / "vocab.json").write_text("{}")
        RobertaTokenizer.from_folder(tmp_path)


def test_offsets_are_transformers_offsets_in_bytes(folder):
    """Spans without the spaces around pieces, out to whole characters where a piece
    holds part of one: `transformers`' character offsets, counted in bytes."""
    import transformers

    tokenizer = RobertaTokenizer.from_folder(folder)
    pieces, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(PROBES))
    assert pieces.to_list() == tokenizer.tokenize(tf.constant(PROBES)).to_list()
    reference = transformers.RobertaTokenizer.from_pretrained(folder)
    for text, row_starts, row_ends in zip(PROBES, starts.to_list(), ends.to_list(), strict=True):
        theirs = reference(text, add_special_tokens=False, return_offsets_mapping=True)
        in_bytes = [
            (len(text[:s].encode()), len(text[:e].encode())) for s, e in theirs["offset_mapping"]
        ]
        assert list(zip(row_starts, row_ends, strict=True)) == in_bytes


def test_span_qa_labels_and_layout_as_transformers(folder):
    import transformers

    from tests.models.end_to_end import assert_span_labels_as_transformers

    assert_span_labels_as_transformers(
        RobertaTokenizer.from_folder(folder, sequence_length=40),
        transformers.RobertaTokenizer.from_pretrained(folder),
        ["which dog ?", "what was it ?", "and here ?"],
        [CORPUS[0], CORPUS[1], "Emoji 😀🎉 and 👍🏽 here"],
        ["lazy dog", "déjà vu", "👍🏽 here"],
    )
    with pytest.raises(ValueError, match="all 256 byte symbols"):
        small = {"<s>": 0, "<pad>": 1, "</s>": 2, "<mask>": 3, "a": 4}
        RobertaTokenizer(small, ["a a"]).tokenize_with_offsets(["a"])


def test_words_are_read_as_transformers_reads_split_words(folder):
    """Tagging's input: each word after a space (`is_split_into_words=True`,
    `add_prefix_space=True`), the same ids and word of every piece."""
    import transformers

    from keras_attn.data import tagging_inputs

    words = [["Café", "naïve", "😀", "antidisestablishmentarianismxyz", "."], CORPUS[0].split()]
    ours = tagging_inputs(RobertaTokenizer.from_folder(folder, sequence_length=16), words)
    reference = transformers.RobertaTokenizer.from_pretrained(folder, add_prefix_space=True)
    theirs = reference(
        words, is_split_into_words=True, truncation=True, max_length=16, padding="max_length"
    )
    np.testing.assert_array_equal(ours["token_ids"], theirs["input_ids"])
    for row in range(2):
        expected = [-1 if w is None else w for w in theirs.word_ids(row)]
        assert ours["word_ids"].numpy()[row].tolist() == expected


def _graph_of(tokenizer):
    return tf.function(lambda text: tokenizer(text)["token_ids"])


@pytest.mark.slow  # 5-6 s alone: keras-hub's merges, untraced and traced
def test_the_merges_are_traced_once_for_eager_calls_and_for_every_graph(folder):
    """A batch of strings goes through one `tf.function` of the tokenizer: eager calls of
    any batch size run its one trace, and graphs that tokenise (an export's signatures)
    call it rather than tracing keras-hub's merge loop again; the answers are the
    untraced ones, and the tokenizer is freed with its last reference."""
    import gc
    import weakref

    from keras_attn.models.roberta import roberta_tokenizer

    tokenizer = RobertaTokenizer.from_folder(folder, sequence_length=16)
    untraced = [tokenizer._merged(tf.constant(PROBES[:n])) for n in (1, 8)]
    for n, expected in zip((1, 8), untraced, strict=True):
        assert tokenizer.tokenize(tf.constant(PROBES[:n])).to_list() == expected.to_list()
    graphs = [_graph_of(tokenizer) for _ in range(2)]
    for graph in graphs:
        graph.get_concrete_function(tf.TensorSpec([None], tf.string))
    assert tokenizer._compiled_pieces().experimental_get_tracing_count() == 1
    assert (
        tokenizer.tokenize(tf.constant("The fox")).numpy().tolist()
        == (tokenizer.tokenize(tf.constant(["The fox"])).to_list()[0])
    )  # a scalar: the untraced path, the same pieces

    freed = weakref.ref(tokenizer)
    del tokenizer, graphs, graph
    gc.collect()
    assert freed() is None and not roberta_tokenizer._COMPILED
