"""Tagging, span QA and multiple choice on strings (issue 59, the fine-tuning kinds):
`fit` on strings trains exactly as `fit` on the same batches made by hand with
`keras_attn.data`'s task inputs, `predict` on strings equals the token-id path, and
the model with its preprocessor survives a `.keras` file and serves, exported, what it
predicts; each preprocessor's mistakes."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import multiple_choice_inputs, span_qa_inputs, tagging_inputs
from keras_attn.models import (
    BertBackbone,
    BertMultipleChoice,
    BertSpanQA,
    BertTokenClassifier,
    MultipleChoicePreprocessor,
    SpanQAPreprocessor,
    TokenClassifierPreprocessor,
)
from tests.models.conftest import LENGTH, SIZE

# What a few steps compute is this module's subject, the traced steps being
# tests/training's: its tests run eagerly (conftest.py's `eager`), in about half the time.
pytestmark = pytest.mark.eager

INPUTS = ("token_ids", "segment_ids", "padding_mask")


def _backbone(tokenizer):
    keras.utils.set_random_seed(0)
    return BertBackbone.from_size(
        "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=LENGTH, **SIZE
    )


def _weights(model):
    return [np.array(w) for w in model.weights]


def _fits_alike(build, preprocessor, strings, by_hand, tmp_path):
    """Trains `build()` on `strings` through `preprocessor` and another on `by_hand`
    (3 steps of 4, the same dropout draws); the weights equal, and the first model's
    `.keras` round trip predicts the strings as the other predicts the token ids.
    Returns the reloaded model and the token-id path's predictions."""
    ours, theirs = build(), build()
    ours.preprocessor = preprocessor
    for model in (ours, theirs):
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(strings)
    keras.utils.set_random_seed(1)
    ours.fit(x, y, sample_weight=sample_weight, batch_size=4, shuffle=False, verbose=0)
    # The hand-made batches as a dataset too: Keras's graph for arrays knows the batch
    # size, a dataset's does not, and their float rounding differs (Adam lifts it to
    # 1e-5 on weights whose gradients are ~0; the same arrays, batched by Keras, differ
    # from themselves as a dataset by as much).
    keras.utils.set_random_seed(1)
    theirs.fit(tf.data.Dataset.from_tensor_slices(by_hand).batch(4), shuffle=False, verbose=0)
    assert int(ours.optimizer.iterations) == int(theirs.optimizer.iterations) == 3
    moved = max(np.abs(a - b).max() for a, b in zip(_weights(ours), _weights(build()), strict=True))
    assert moved > 1e-3  # the steps trained
    for weight, a, b in zip(ours.weights, _weights(ours), _weights(theirs), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6, err_msg=weight.path)
    ours.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert type(loaded.preprocessor) is type(preprocessor)
    assert loaded.preprocessor.get_config() == preprocessor.get_config()
    expected = theirs.predict(by_hand[0], batch_size=5, verbose=0)
    keras.tree.map_structure(
        lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5),
        loaded.predict(strings[0], batch_size=5, verbose=0),
        expected,
    )
    return loaded, expected


@pytest.mark.slow  # 12-15 s each: `make test`; the classifier's BERT case is in test-fast
def test_tagging_on_word_lists(tokenizers, reviews, tmp_path):
    tokenizer = tokenizers["bert"]
    words = [[w for w in text.split() if w.isalpha()][:8] or ["film"] for text in reviews[0]]
    rng = np.random.default_rng(0)
    tags = [rng.integers(0, 3, len(row)).tolist() for row in words]
    x = tagging_inputs(tokenizer, words, tags)
    loaded, logits = _fits_alike(
        lambda: BertTokenClassifier(_backbone(tokenizer), num_classes=3),
        TokenClassifierPreprocessor(tokenizer),
        (words, tags),
        ({k: x[k] for k in INPUTS}, x["labels"], x["sample_weight"]),
        tmp_path,
    )
    # Served from sentences (these words split as the server splits them): each word's
    # tag is the one its first piece predicts.
    path = loaded.export(tmp_path / "tagger" / "1", warmup=False)
    served = tf.saved_model.load(str(path)).signatures["serving_default"]
    tag_ids = served(text=tf.constant([" ".join(row) for row in words]))["tag_ids"].numpy()
    word_ids = x["word_ids"].numpy()
    for row in range(len(words)):
        kept = sorted(set(word_ids[row].tolist()) - {-1})  # the words the rows hold
        first = [int(np.flatnonzero(word_ids[row] == w)[0]) for w in kept]
        assert tag_ids[row, kept].tolist() == logits[row, first].argmax(-1).tolist()


@pytest.mark.slow  # 12-15 s each: `make test`; the classifier's BERT case is in test-fast
def test_span_qa_on_questions_and_contexts(tokenizers, reviews, tmp_path):
    tokenizer = tokenizers["bert"]
    contexts = ["Señor Ann sang a song about " + text[:40] for text in reviews[0]]
    questions = ["who sang ?"] * len(contexts)
    starts = [context.index("Ann") for context in contexts]  # characters (after "ñ")
    ends = [start + 3 for start in starts]
    x = span_qa_inputs(
        tokenizer,
        tf.constant(questions),
        tf.constant(contexts),
        [len(c[:s].encode()) for c, s in zip(contexts, starts, strict=True)],
        [len(c[:e].encode()) for c, e in zip(contexts, ends, strict=True)],
    )
    labels = {"start_logits": x["start_positions"], "end_logits": x["end_positions"]}
    assert x["answer_in_window"].numpy().all()
    preprocessor = SpanQAPreprocessor(tokenizer, max_question_length=8)
    loaded, outputs = _fits_alike(
        lambda: BertSpanQA(_backbone(tokenizer)),
        preprocessor,
        ((questions, contexts), (starts, ends)),
        ({k: x[k] for k in INPUTS}, labels),
        tmp_path,
    )
    np.testing.assert_array_equal(  # a dict of the answers says the same
        preprocessor(
            {"question": questions, "context": contexts},
            {"answer_start": starts, "answer_end": ends},
        )[1]["start_logits"],
        x["start_positions"],
    )
    path = loaded.export(tmp_path / "qa" / "1", warmup=False)
    served = tf.saved_model.load(str(path)).signatures["serving_default"]
    answers = served(question=tf.constant(questions), context=tf.constant(contexts))
    first, last, _ = BertSpanQA.decode_spans(
        outputs["start_logits"], outputs["end_logits"], x["context_mask"]
    )
    for row, context in enumerate(contexts):
        span = (int(x["token_starts"][row, first[row]]), int(x["token_ends"][row, last[row]]))
        assert answers["answer"][row].numpy().decode() == context.encode()[slice(*span)].decode()


@pytest.mark.slow  # 12-15 s each: `make test`; the classifier's BERT case is in test-fast
def test_multiple_choice_on_contexts_and_choices(tokenizers, reviews, tmp_path):
    tokenizer = tokenizers["bert"]
    texts = reviews[0]
    contexts = list(texts)
    choices = [[texts[(i + j) % 12][:60] for j in (1, 2, 3)] for i in range(12)]
    labels = np.arange(12) % 3
    x = multiple_choice_inputs(tokenizer, tf.constant(contexts), tf.constant(choices))
    loaded, logits = _fits_alike(
        lambda: BertMultipleChoice(_backbone(tokenizer), num_choices=3),
        MultipleChoicePreprocessor(tokenizer),
        ((contexts, choices), labels),
        (x, labels),
        tmp_path,
    )
    path = loaded.export(tmp_path / "choice" / "1", warmup=False)
    served = tf.saved_model.load(str(path)).signatures["serving_default"]
    chosen = served(context=tf.constant(contexts), choices=tf.constant(choices))["choice_ids"]
    np.testing.assert_array_equal(chosen.numpy(), logits.argmax(-1))


def test_the_task_preprocessors_name_their_mistakes(tokenizers):
    tokenizer = tokenizers["bert"]
    with pytest.raises(TypeError, match="batch of word lists"):
        TokenClassifierPreprocessor(tokenizer)(["a sentence, not words"])
    with pytest.raises(ValueError, match="'question' and 'context'"):
        SpanQAPreprocessor(tokenizer)({"question": ["a"]})
    with pytest.raises(ValueError, match="tuple \\(answer starts, answer ends\\)"):
        SpanQAPreprocessor(tokenizer)((["a"], ["b"]), [0])
    with pytest.raises(ValueError, match="`max_question_length` an int >= 1"):
        SpanQAPreprocessor(tokenizer, max_question_length=0)

    class NoOffsets:  # a tokenizer that cannot say where its pieces are
        sequence_length = LENGTH

        def tokenize(self, text):
            return text

    with pytest.raises(TypeError, match="`tokenize_with_offsets` for span QA.*NoOffsets"):
        SpanQAPreprocessor(NoOffsets(), family="bert")
    with pytest.raises(ValueError, match="'context' and 'choices'"):
        MultipleChoicePreprocessor(tokenizer)({"context": ["a"]})
    with pytest.raises(ValueError, match="shape \\(batch, num_choices\\)"):
        MultipleChoicePreprocessor(tokenizer)((["a"], ["b"]))
