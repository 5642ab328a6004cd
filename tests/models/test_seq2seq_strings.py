"""The encoder-decoder on strings (issue 59, the seq2seq kind): `fit` on source and
target texts trains exactly as `fit` on the same pairs tokenised by hand, `predict`
equals the token-id path, the model with its preprocessor (two vocabularies) survives a
`.keras` file, and `generate` translates strings as the token-id path does and as its
export serves."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer
from keras_attn.models import Seq2SeqPreprocessor, TransformerSeq2Seq
from tests.models.conftest import LENGTH

# What a few steps compute is this module's subject, the traced steps being
# tests/training's: its tests run eagerly (conftest.py's `eager`), in about half the time.
pytestmark = pytest.mark.eager

TARGET_LENGTH = 12


def _tokenizers(tokenizers):
    """The source side's WordPiece and a smaller target vocabulary (its first 300)."""
    source = tokenizers["bert"]
    return source, WordPieceTokenizer(source.vocabulary[:300], sequence_length=TARGET_LENGTH)


def _model(source, target):
    keras.utils.set_random_seed(0)
    return TransformerSeq2Seq(
        source.vocabulary_size, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
        max_sequence_length=LENGTH, target_vocabulary_size=target.vocabulary_size,
    )  # fmt: skip


def _by_hand(source, target, sources, targets):
    """Source pieces cut to LENGTH; `[CLS] target [SEP]` cut to TARGET_LENGTH + 1."""
    x = source.tokenize(tf.constant(sources))[:, :LENGTH].to_tensor(shape=[None, LENGTH])
    rows = [
        ([target.cls_id] + row + [target.sep_id])[: TARGET_LENGTH + 1]
        for row in target.tokenize(tf.constant(targets)).to_list()
    ]
    ids = np.zeros((len(rows), TARGET_LENGTH + 1), "int32")
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    inputs = {"encoder_token_ids": x.numpy(), "decoder_token_ids": ids[:, :-1]}
    return inputs, ids[:, 1:], (ids[:, 1:] != 0).astype("float32")


def _weights(model):
    return [np.array(w) for w in model.weights]


@pytest.mark.slow  # 15 s: `make test`
def test_translation_pairs_train_predict_generate_and_serve(tokenizers, reviews, tmp_path):
    source, target = _tokenizers(tokenizers)
    sources = list(reviews[0])
    targets = [" ".join(reversed(text.split()))[:50] for text in sources]
    preprocessor = Seq2SeqPreprocessor(source, target)
    ours, theirs = _model(source, target), _model(source, target)
    ours.preprocessor = preprocessor
    for model in (ours, theirs):
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
    ours.fit(sources, targets, batch_size=4, shuffle=False, verbose=0)  # 3 steps
    by_hand = _by_hand(source, target, sources, targets)
    theirs.fit(tf.data.Dataset.from_tensor_slices(by_hand).batch(4), shuffle=False, verbose=0)
    assert int(ours.optimizer.iterations) == int(theirs.optimizer.iterations) == 3
    moved = max(
        np.abs(a - b).max()
        for a, b in zip(_weights(ours), _weights(_model(source, target)), strict=True)
    )
    assert moved > 1e-3
    for a, b in zip(_weights(ours), _weights(theirs), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    ours.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert type(loaded.preprocessor) is Seq2SeqPreprocessor
    assert loaded.preprocessor.get_config() == preprocessor.get_config()
    assert loaded.preprocessor.target_tokenizer.vocabulary == target.vocabulary
    start = {**by_hand[0], "decoder_token_ids": np.full((12, 1), target.cls_id, "int32")}
    np.testing.assert_allclose(
        loaded.predict(sources, batch_size=5, verbose=0),
        theirs.predict(start, batch_size=5, verbose=0),
        atol=1e-5,
    )
    # Translating strings: the token-id path's tokens, detokenised; the export serves them.
    generated = loaded.generate(sources[:3], max_length=8)
    tokens = theirs.generate(
        [row[row > 0].tolist() for row in by_hand[0]["encoder_token_ids"][:3]],
        8,
        target.cls_id,
        end_token_id=target.sep_id,
    )
    assert generated == target.detokenize(tokens)
    assert loaded.generate(sources[0], max_length=8) == generated[0]
    path = loaded.export(tmp_path / "translate" / "1", warmup=False)
    served = tf.saved_model.load(str(path)).signatures["serving_default"]
    texts = served(source=tf.constant(sources[:3]))["text"].numpy().astype(str).tolist()
    assert texts == loaded.generate(sources[:3])


def test_the_seq2seq_preprocessor_names_its_mistakes(tokenizers, tmp_path):
    source, target = _tokenizers(tokenizers)
    with pytest.raises(ValueError, match="both `tokenizer`.*and `target_tokenizer`"):
        Seq2SeqPreprocessor(source)
    with pytest.raises(TypeError, match="`target_tokenizer` to be a WordPieceTokenizer"):
        Seq2SeqPreprocessor(source, "vocab.txt")
    preprocessor = Seq2SeqPreprocessor(source, target)
    x = preprocessor("A fine film.")  # one string, no target: the decoder starts
    assert x["encoder_token_ids"].shape == (LENGTH,) and x["decoder_token_ids"].shape == (1,)
    empty = Seq2SeqPreprocessor.from_config(preprocessor.get_config())
    with pytest.raises(ValueError, match="lack its vocabularies: \\['source_vocab.txt'"):
        empty.load_assets(tmp_path)
    with pytest.raises(ValueError, match="no Seq2SeqPreprocessor to read text"):
        _model(source, target).generate(["A fine film."], 8, target.cls_id)
