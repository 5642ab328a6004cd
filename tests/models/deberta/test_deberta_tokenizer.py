"""`DebertaV3Tokenizer` equals `transformers`' `DebertaV2Tokenizer` (and its pieces
`sentencepiece`'s own) on a SentencePiece model trained here (accents, emoji, CJK, long
and unseen words, characters only NFKC changes, whitespace runs and tabs; single texts
and pairs, cut to length), in eager code and in the graph, and on a model without a
normaliser of its own; its files load back in both."""

import io
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.models.deberta import DebertaV3Tokenizer

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
    "  two  spaces\tand a tab\nand a line",
    "Ünïcödé 中文 日本語 straße",
    "unseen Ωmega ☃ snowman ₿, a ligature ﬁ and ① circled",
    "",
    "trailing   ",
]


def model_folder(folder, mask=True, normalization="nmt_nfkc"):
    """A unigram SentencePiece model trained with `sentencepiece` (NFKC, as DeBERTa's,
    unless `normalization` says otherwise), saved as a Hugging Face folder's
    `spm.model`."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        normalization_rule_name=normalization,
        sentence_iterator=iter(CORPUS * 20),
        model_writer=model,
        vocab_size=120,
        model_type="unigram",
        pad_id=0,
        bos_id=1,
        eos_id=2,
        unk_id=3,
        pad_piece="[PAD]",
        bos_piece="[CLS]",
        eos_piece="[SEP]",
        unk_piece="[UNK]",
        user_defined_symbols=["[MASK]"] if mask else [],
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spm.model").write_bytes(model.getvalue())
    return folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return model_folder(tmp_path_factory.mktemp("deberta_spm"))


def _reference(folder, length):
    import transformers

    tokenizer = transformers.DebertaV2Tokenizer.from_pretrained(folder)
    return lambda text, pair=None: tokenizer(
        text, pair, truncation=True, max_length=length, padding="max_length"
    )


@pytest.mark.parametrize("length", [64, 12])
def test_pieces_and_packing_equal_transformers(folder, length):
    tokenizer = DebertaV3Tokenizer.from_folder(folder, sequence_length=length)
    reference = _reference(folder, length)
    pairs = list(reversed(PROBES))
    for args in ((PROBES,), (PROBES, pairs)):
        ours = tokenizer(*(tf.constant(a) for a in args))
        expected = reference(*args)
        np.testing.assert_array_equal(ours["token_ids"], expected["input_ids"])
        np.testing.assert_array_equal(ours["segment_ids"], expected["token_type_ids"])
        np.testing.assert_array_equal(ours["padding_mask"], expected["attention_mask"])

    @tf.function
    def in_the_graph(text, pair):
        return tokenizer(text, pair)

    graph = in_the_graph(tf.constant(PROBES), tf.constant(pairs))
    np.testing.assert_array_equal(graph["token_ids"], ours["token_ids"])


def test_pieces_are_sentencepieces_own(folder):
    """The model's own normaliser runs (NFKC: "ﬁ" is "fi", "①" is "1"), as
    `sentencepiece` runs it: the reference that does not move with `transformers`
    (5.0 to 5.24 set it aside)."""
    import sentencepiece

    tokenizer = DebertaV3Tokenizer.from_folder(folder)
    reference = sentencepiece.SentencePieceProcessor(model_file=str(folder / "spm.model"))
    assert tokenizer.model_normalizes
    expected = [reference.encode(text) for text in PROBES]
    assert tokenizer.tokenize(tf.constant(PROBES)).to_list() == expected


def test_a_model_without_a_normaliser_is_normalised_as_transformers_does(tmp_path):
    """No character map (`identity`): whitespace runs, tabs and line breaks become one
    space, then NFC, as `transformers` does for such a model."""
    folder = model_folder(tmp_path / "identity", normalization="identity")
    tokenizer = DebertaV3Tokenizer.from_folder(folder, sequence_length=64)
    assert not tokenizer.model_normalizes
    pairs = list(reversed(PROBES))
    ours = tokenizer(tf.constant(PROBES), tf.constant(pairs))
    expected = _reference(folder, 64)(PROBES, pairs)
    np.testing.assert_array_equal(ours["token_ids"], expected["input_ids"])


def test_the_mask_is_added_after_the_pieces_and_files_load_in_transformers(tmp_path):
    import transformers

    folder = model_folder(tmp_path / "no_mask", mask=False)  # as DeBERTa-v3's spm.model
    tokenizer = DebertaV3Tokenizer.from_folder(folder, sequence_length=64)
    reference = transformers.DebertaV2Tokenizer.from_pretrained(folder)
    assert tokenizer.mask_id == reference.mask_token_id == tokenizer.vocabulary_size - 1
    assert tokenizer.detokenize(tokenizer(tf.constant(CORPUS[:2]))["token_ids"]) == CORPUS[:2]
    written = tokenizer.save_pretrained(tmp_path / "written")
    loaded = transformers.AutoTokenizer.from_pretrained(written)
    expected = _reference(folder, 32)(PROBES)["input_ids"]
    got = loaded(PROBES, truncation=True, max_length=32, padding="max_length")["input_ids"]
    assert got == expected


def test_bad_models_and_lengths_are_named(folder, tmp_path):
    with pytest.raises(ValueError, match="sequence_length"):
        DebertaV3Tokenizer((folder / "spm.model").read_bytes(), sequence_length=2)
    with pytest.raises(FileNotFoundError, match="spm.model"):
        DebertaV3Tokenizer.from_folder(tmp_path)


@pytest.mark.parametrize("charsmap", [b"\x01\x02", b"\xff\xff\xff\x7f" + bytes(64), "cut"])
def test_a_broken_normaliser_is_refused_before_the_graph(folder, charsmap):
    """A model whose normaliser's map is broken or claims more bytes than it holds: one
    `ValueError` with SentencePiece's reason, not TensorFlow's error at the first call."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString((folder / "spm.model").read_bytes())
    spec = proto.normalizer_spec
    spec.precompiled_charsmap = spec.precompiled_charsmap[:100] if charsmap == "cut" else charsmap
    with pytest.raises(ValueError, match="SentencePiece cannot load: .*(broken|size)"):
        DebertaV3Tokenizer(proto.SerializeToString())


def test_offsets_are_each_pieces_text_in_the_text_as_given(folder):
    """Offsets into the text before normalisation (whitespace runs, tabs, NFKC): the
    spans, in order and apart, read as NFKC reads them, spell the pieces less `▁` (a
    character NFKC changes is spanned whole by its last piece: "ﬁ", read "f" "i", by
    the "i"); an unknown piece spans a word's characters."""
    tokenizer = DebertaV3Tokenizer.from_folder(folder)
    pieces, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(PROBES))
    assert pieces.to_list() == tokenizer.tokenize(tf.constant(PROBES)).to_list()
    for text, ids, row_starts, row_ends in zip(
        PROBES, pieces.to_list(), starts.to_list(), ends.to_list(), strict=True
    ):
        assert all(e <= s for e, s in zip(row_ends[:-1], row_starts[1:], strict=True))
        spans = [text.encode()[s:e].decode() for s, e in zip(row_starts, row_ends, strict=True)]
        written = []  # each piece's text: an unknown one's is its span
        for i, span in zip(ids, spans, strict=True):
            if i == tokenizer.unk_id:
                assert span and not span.isspace()
            written.append(span if i == tokenizer.unk_id else tokenizer.vocabulary[i])
        nfkc = [unicodedata.normalize("NFKC", x) for x in (*spans, *written)]
        assert "".join(nfkc[: len(spans)]) == "".join(nfkc[len(spans) :]).replace("\u2581", "")
        assert "ﬁ" not in text or "ﬁ" in spans  # spanned whole


def test_span_qa_labels_and_layout_as_transformers(folder):
    import transformers

    from tests.models.end_to_end import assert_span_labels_as_transformers

    assert_span_labels_as_transformers(
        DebertaV3Tokenizer.from_folder(folder, sequence_length=64),
        transformers.DebertaV2Tokenizer.from_pretrained(folder),
        ["which dog ?", "what was it ?", "and here ?"],
        [CORPUS[0], CORPUS[1], "Emoji  😀🎉 and\t👍🏽 here"],
        ["lazy dog", "déjà vu", "👍🏽 here"],
    )


def test_words_are_read_as_transformers_reads_split_words(folder):
    """Tagging's input: each word its own pieces (`is_split_into_words=True`), the same
    ids and word of every piece."""
    import transformers

    from keras_attn.data import tagging_inputs

    words = [["Café", "naïve", "😀", "antidisestablishmentarianismxyz", "."], CORPUS[0].split()]
    ours = tagging_inputs(DebertaV3Tokenizer.from_folder(folder, sequence_length=16), words)
    theirs = transformers.DebertaV2Tokenizer.from_pretrained(folder)(
        words, is_split_into_words=True, truncation=True, max_length=16, padding="max_length"
    )
    np.testing.assert_array_equal(ours["token_ids"], theirs["input_ids"])
    for row in range(2):
        expected = [-1 if w is None else w for w in theirs.word_ids(row)]
        assert ours["word_ids"].numpy()[row].tolist() == expected


def test_a_tokenizer_outlives_keras_reseeding_and_serves_from_a_saved_model(folder, tmp_path):
    """`keras.utils.set_random_seed` clears TensorFlow's kernel cache, which deleted TensorFlow
    Text's kernel-owned SentencePiece model: every tokenizer made before it failed ("Resource
    ... SentencepieceOp ... does not exist"), in Python and in a `tf.data` pipeline. Two
    tokenizers of different models stay apart; a SavedModel of one loads and tokenises."""
    import keras

    tokenizer = DebertaV3Tokenizer.from_folder(folder, sequence_length=16)
    before = tokenizer(["The film was fine."])["token_ids"].numpy()
    keras.utils.set_random_seed(0)
    after = tokenizer(["The film was fine."])["token_ids"].numpy()
    mapped = tf.data.Dataset.from_tensor_slices(["The film was fine."]).batch(1)
    mapped = mapped.map(lambda text: tokenizer(text)["token_ids"])
    keras.utils.set_random_seed(1)
    np.testing.assert_array_equal(before, after)
    np.testing.assert_array_equal(before, next(iter(mapped)).numpy())
    other = model_folder(tmp_path / "other", mask=False)  # another model: its own resource
    assert tokenizer._pieces._model_resource._shared_name != (
        DebertaV3Tokenizer.from_folder(other)._pieces._model_resource._shared_name
    )
    module = tf.Module()
    module.tokenizer = tokenizer
    module.ids = tf.function(
        lambda text: tokenizer(text)["token_ids"],
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    keras.utils.set_random_seed(2)
    np.testing.assert_array_equal(loaded.ids(tf.constant(["The film was fine."])).numpy(), before)
