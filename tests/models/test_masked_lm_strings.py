"""Masked-LM pre-training on strings (issue 59, the masked-LM kind): `fit` on strings
trains exactly as `fit` on the same texts packed and masked by hand with each batch's
seed, `predict` on strings equals the token-id path, a second epoch masks anew, and the
model with its preprocessor survives a `.keras` file; `MaskedLM.from_preset` picks the
family's model; the preprocessor's mistakes."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import MaskedLMMasker
from keras_attn.data.string_datasets import batch_seeds, preprocessed
from keras_attn.models import (
    BertPretrainer,
    DebertaV3MaskedLM,
    MaskedLM,
    MaskedLMPreprocessor,
    TextClassifier,
    XLNetBackbone,
    registry,
)
from tests.models.conftest import LENGTH, SIZE, TRACED

# What a few steps compute on strings is this module's subject, the traced steps being
# tests/training's: its tests run eagerly (conftest.py's `eager`), in about half the time.
pytestmark = pytest.mark.eager  # byte-level BPE cases: `TRACED`

SEED = 7


def _masked_lm(family, tokenizer):
    """A tiny masked-LM model of `family` on `tokenizer`'s vocabulary (seeded)."""
    keras.utils.set_random_seed(0)
    entry = registry.family(family)
    backbone = entry.backbone_cls.from_size(
        "tiny", vocabulary_size=tokenizer.vocabulary_size, **SIZE
    )
    return entry.masked_lm(backbone)


def _by_hand(tokenizer, texts, batch_size):
    """The batches a user built before preprocessors: the tokenizer's packing, then
    BERT's masking with `preprocessed`'s seed for each batch."""
    masker = MaskedLMMasker(
        len(tokenizer.vocabulary),
        tokenizer.mask_id,
        tokenizer.special_token_ids,
        max_predictions_per_seq=math.ceil(0.15 * LENGTH),
    )
    batches = math.ceil(len(texts) / batch_size)
    x, y, w = [], [], []
    for i, seed in enumerate(batch_seeds(SEED, batches)):
        packed = tokenizer(tf.constant(texts[i * batch_size : (i + 1) * batch_size]))
        masked = masker(packed["token_ids"], seed)
        x.append(
            {
                "token_ids": masked["token_ids"],
                "segment_ids": packed["segment_ids"],
                "padding_mask": packed["padding_mask"],
                "masked_positions": masked["masked_positions"],
            }
        )
        y.append(masked["masked_ids"])
        w.append(masked["masked_weights"])
    x = {k: np.concatenate([b[k] for b in x]) for k in x[0]}
    return x, {"mlm_logits": np.concatenate(y)}, {"mlm_logits": np.concatenate(w)}


def _weights(model):
    return [np.array(w) for w in model.weights]


@pytest.mark.parametrize("family", ["bert", pytest.param("deberta", marks=pytest.mark.slow)])
def test_masked_lm_trains_on_strings_as_on_the_same_masks_by_hand(
    family, tokenizers, reviews, tmp_path
):
    texts = reviews[0]
    tokenizer = tokenizers[family]
    preprocessor = MaskedLMPreprocessor(tokenizer, seed=SEED)
    ours, theirs = _masked_lm(family, tokenizer), _masked_lm(family, tokenizer)
    assert isinstance(ours, MaskedLM) and not isinstance(ours, TextClassifier)
    ours.preprocessor = preprocessor
    for model in (ours, theirs):
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
    ours.fit(texts, batch_size=4, shuffle=False, verbose=0)  # 3 steps
    x, y, w = _by_hand(tokenizer, texts, 4)
    assert w["mlm_logits"].sum() >= 12  # every row predicts something
    theirs.fit(x, y, sample_weight=w, batch_size=4, shuffle=False, verbose=0)
    assert int(ours.optimizer.iterations) == int(theirs.optimizer.iterations) == 3
    moved = max(
        np.abs(a - b).max()
        for a, b in zip(_weights(ours), _weights(_masked_lm(family, tokenizer)), strict=True)
    )
    assert moved > 1e-3  # the steps trained
    for a, b in zip(_weights(ours), _weights(theirs), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    # Predicting strings masks them as the first epoch did, after a `.keras` round trip.
    ours.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert type(loaded.preprocessor) is MaskedLMPreprocessor
    assert loaded.preprocessor.get_config() == preprocessor.get_config()
    np.testing.assert_allclose(
        loaded.predict(texts, batch_size=4, verbose=0)["mlm_logits"],
        theirs.predict(x, batch_size=4, verbose=0)["mlm_logits"],
        atol=1e-5,
    )


def test_each_epoch_masks_anew_and_a_seed_masks_the_same(tokenizers, reviews):
    texts = reviews[0]
    preprocessor = MaskedLMPreprocessor(tokenizers["bert"], seed=SEED)
    dataset = preprocessed(preprocessor, texts, batch_size=6)

    def positions(data):
        return np.concatenate([x["masked_positions"].numpy() for x, _, _ in data])

    first, second = positions(dataset), positions(dataset)
    assert not np.array_equal(first, second)  # dynamic masking: a new epoch, new masks
    np.testing.assert_array_equal(first, positions(preprocessed(preprocessor, texts, batch_size=6)))
    # One string, a pair, and keras-hub's way: `dataset.map(preprocessor)`.
    x, y, w = preprocessor("A fine film, a fine cast.", seed=[1, 2])
    assert x["token_ids"].shape == (LENGTH,) and y["mlm_logits"].shape == (4,)
    x, _, _ = preprocessor((["A fine film."], ["A dull one."]), seed=[1, 2])
    assert x["segment_ids"].numpy().max() == 1
    mapped = tf.data.Dataset.from_tensor_slices(texts).batch(4).map(preprocessor)
    x, y, w = next(iter(mapped))
    assert x["masked_positions"].shape == (4, 4) and float(w["mlm_logits"].numpy().min()) >= 0


def test_masked_lm_from_a_preset_folder_and_its_mistakes(tokenizers, tiny_preset):
    tokenizer = tokenizers["bert"]
    model = MaskedLM.from_preset(tiny_preset, sequence_length=LENGTH, mask_selection_rate=0.3)
    assert type(model) is BertPretrainer and model.sentence_head is None
    assert model.preprocessor.mask_selection_rate == 0.3
    assert model.preprocessor.mask_selection_length == math.ceil(0.3 * LENGTH)
    history = model.fit(["A fine film, a fine cast.", "A dull one."], verbose=0)
    assert set(history.history) == {"loss", "mlm_logits_accuracy"}
    assert np.isclose(float(model.optimizer.learning_rate), 5e-5)  # keras-hub's
    # The family's class asks for the masked-LM head alone too.
    assert BertPretrainer.from_preset(tiny_preset, sequence_length=LENGTH).sentence_head is None
    with pytest.raises(ValueError, match="masked-LM head alone.*sentence_objective='nsp'"):
        BertPretrainer(model.backbone, preprocessor=MaskedLMPreprocessor(tokenizer))
    with pytest.raises(ValueError, match="masked-LM head alone.*'sop'"):
        BertPretrainer.from_preset(tiny_preset, sequence_length=LENGTH, sentence_objective="sop")
    assert issubclass(DebertaV3MaskedLM, MaskedLM)
    XLNetBackbone(tokenizer.vocabulary_size, 1, 2, 8, 16).save(tiny_preset / "backbone.keras")
    with pytest.raises(ValueError, match="\\(xlnet\\) has no masked-LM model"):
        MaskedLM.from_preset(tiny_preset, sequence_length=LENGTH)
    with pytest.raises(TypeError, match="built from a preset"):
        MaskedLM()
    # The preprocessor's own mistakes, named at construction or call.
    with pytest.raises(ValueError, match="`mask_selection_rate` in \\(0, 1\\]"):
        MaskedLMPreprocessor(tokenizer, mask_selection_rate=0)
    with pytest.raises(ValueError, match="summing to at most 1"):
        MaskedLMPreprocessor(tokenizer, mask_token_rate=0.9, random_token_rate=0.2)
    with pytest.raises(ValueError, match="`mask_selection_length` an int >= 1"):
        MaskedLMPreprocessor(tokenizer, mask_selection_length=0)
    with pytest.raises(TypeError, match="`seed` an int or None"):
        MaskedLMPreprocessor(tokenizer, seed="7")
    with pytest.raises(ValueError, match="targets are its masked tokens"):
        MaskedLMPreprocessor(tokenizer)(["a film"], [1])


def _expected_fill(model, tokenizer, texts, top_k):
    """What the fill-mask export should answer, from the token-id path: each text's
    parts between masks tokenized alone (whitespace before a mask dropped), packed with
    the mask ids between them, the model's logits at the masks, softmax, top k."""
    from keras_attn.export.signatures.fill_mask import mask_token

    mask = mask_token(tokenizer)
    rows = []
    for text in texts:
        parts = text.split(mask)
        parts = [p.rstrip() for p in parts[:-1]] + parts[-1:]
        pieces = [tokenizer.tokenize(tf.constant([p]))[0].numpy().tolist() for p in parts]
        ids = sum((p + [tokenizer.mask_id] for p in pieces[:-1]), []) + pieces[-1]
        rows.append(tf.ragged.constant([ids], tf.int32))
    answers = []
    for row in rows:
        x = {k: v.numpy() for k, v in tokenizer.pack([row]).items()}
        positions = np.flatnonzero(x["token_ids"][0] == tokenizer.mask_id)[None]
        logits = model.predict({**x, "masked_positions": positions}, verbose=0)["mlm_logits"]
        probabilities = tf.nn.softmax(logits[0]).numpy()
        top = np.argsort(-probabilities, axis=-1, kind="stable")[:, :top_k]
        answers.append((positions[0], top, np.take_along_axis(probabilities, top, -1)))
    return answers


@pytest.mark.parametrize(
    "family",
    ["bert", *(pytest.param(f, marks=pytest.mark.slow) for f in ("roberta", "deberta"))],
)
@TRACED  # and its piece's text is read "in the graph as served"
def test_the_masked_lm_export_fills_masks_as_the_model_predicts(family, tokenizers, tmp_path):
    """Acceptance 1 for the masked-LM kind: `export` of a `MaskedLM` with its
    preprocessor serves fill-mask (the mask token written in the text, as
    `transformers`' pipeline reads it), equal to the token-id path."""
    tokenizer = tokenizers[family]
    model = _masked_lm(family, tokenizer)
    model.preprocessor = MaskedLMPreprocessor(tokenizer)
    mask = tokenizer.vocabulary[tokenizer.mask_id]
    texts = [
        f"a fine {mask}, and a fine cast.",
        f"{mask} film {mask}",
        "no mask here",
        f"the  {mask}{mask} ending",
    ]
    path = model.export(tmp_path / "fill" / "1", top_k=3, warmup=False)
    served = tf.saved_model.load(str(path)).signatures["serving_default"](text=tf.constant(texts))
    expected = _expected_fill(model, tokenizer, texts, 3)
    np.testing.assert_array_equal(served["num_masks"].numpy(), [1, 2, 0, 2])
    for row, (positions, top, scores) in enumerate(expected):
        count = len(positions)
        np.testing.assert_array_equal(served["mask_positions"].numpy()[row, :count], positions)
        np.testing.assert_array_equal(served["token_ids"].numpy()[row, :count], top)
        np.testing.assert_allclose(served["scores"].numpy()[row, :count], scores, atol=1e-5)
        assert (served["token_ids"].numpy()[row, count:] == -1).all()
    # The top piece as text, in the graph as served (a byte-level piece may be part of a
    # character: U+FFFD then).
    piece = tf.function(tokenizer.detokenize_to_tensor)(
        tf.constant(expected[0][1][:1, :1], tf.int32)
    )
    as_text = piece.numpy()[0].decode("utf-8", "replace").encode()
    assert served["tokens"].numpy()[0, 0, 0] == as_text
    assert served["sequences"].numpy()[2].decode() == "no mask here"
    with pytest.raises(ValueError, match=r"`top_k` an int in \[1, "):
        model.export(tmp_path / "bad", top_k=0)
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("family", ["bert", pytest.param("roberta", marks=pytest.mark.slow)])
def test_a_mask_token_in_text_reads_as_transformers_reads_it(family, tokenizers, sources, tmp_path):
    """The fill-mask export's reading of `[MASK]` / `<mask>` in raw text, against
    `transformers`' fast tokenizers of the same files. RoBERTa's mask token strips the
    whitespace on its left (roberta-base's `tokenizer.json`: `lstrip: true`); a
    tokenizer `transformers` v5 builds from `vocab.json` and `merges.txt` alone no
    longer says so, so the reference is given the published token."""
    import transformers
    from tokenizers import AddedToken

    from keras_attn.export.signatures.fill_mask import pieces_with_masks

    tokenizer = tokenizers[family]
    if family == "bert":
        (tmp_path / "vocab.txt").write_text("\n".join(tokenizer.vocabulary) + "\n")
        reference = transformers.BertTokenizerFast(str(tmp_path / "vocab.txt"))
    else:
        folder = sources["bpe"]
        reference = transformers.RobertaTokenizerFast(
            str(folder / "vocab.json"),
            str(folder / "merges.txt"),
            mask_token=AddedToken("<mask>", lstrip=True, rstrip=False, special=True),
        )
    mask = reference.mask_token
    texts = [
        f"The film is {mask}.",
        f"{mask} a fine  {mask} cast",
        f"no space{mask}here, {mask}{mask}",
        "Café naïve 😀 no mask",
    ]
    ours = tokenizer.pack([pieces_with_masks(tokenizer, tf.constant(texts))])
    for row, text in enumerate(texts):
        expected = reference(text)["input_ids"]
        got = ours["token_ids"].numpy()[row]
        np.testing.assert_array_equal(got[: len(expected)], expected, err_msg=text)
        assert (got[len(expected) :] == tokenizer.pad_id).all()
