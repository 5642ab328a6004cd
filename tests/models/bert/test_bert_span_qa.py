"""BertSpanQA: trained end to end from a SQuAD-style file; span decoding; round trip."""

import json

import keras
import numpy as np
import pytest

from keras_attn.data import WordPieceTokenizer, read_squad, span_qa_inputs
from keras_attn.models import BertBackbone, BertSpanQA

NAMES = ["ann", "bob", "cat", "dan", "eve", "fay", "gus", "hal"]
VERBS = ["likes", "owns", "sells", "paints"]
THINGS = ["red", "blue", "green", "gold", "goldfish", "redwood"]  # the last two are two pieces
VOCAB = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "what", "who", "?", ".", "##fish", "##wood"]
    + NAMES
    + VERBS
    + THINGS[:4]
)


def _write_squad(path, n, seed, bad=False):
    """Contexts of 2 to 4 facts "<name> <verb> <thing> ."; the question names a thing,
    the answer is where the context mentions it: one piece, or two ("goldfish" is
    "gold ##fish", next to a plain "gold" in some contexts)."""
    rng = np.random.default_rng(seed)
    paragraphs = []
    for i in range(n):
        count = rng.integers(2, 5)
        facts = list(
            zip(
                rng.choice(NAMES, count),
                rng.permutation(VERBS)[:count],
                rng.permutation(THINGS)[:count],
                strict=True,
            )
        )
        context = " ".join(f"{name} {verb} {thing} ." for name, verb, thing in facts)
        name, verb, thing = facts[rng.integers(0, count)]
        answer_start = context.index(f"{name} {verb} {thing}") + len(f"{name} {verb} ")
        qas = [
            {
                "id": f"q{i}",
                "question": f"what {thing} ?",
                "answers": [{"text": thing, "answer_start": answer_start}],
            }
        ]
        if bad and i == 0:
            qas.append(
                {
                    "id": "broken",
                    "question": "who ?",
                    "answers": [{"text": "zed", "answer_start": 0}],
                }
            )
        paragraphs.append({"context": context, "qas": qas})
    path.write_text(
        json.dumps({"version": "1.1", "data": [{"title": "facts", "paragraphs": paragraphs}]})
    )
    return path


def _model():
    backbone = BertBackbone(
        vocabulary_size=len(VOCAB),
        num_layers=2,
        num_heads=4,
        hidden_dim=64,
        intermediate_dim=128,
        max_sequence_length=24,
        dropout=0.0,
        initializer_range=0.1,
    )
    return BertSpanQA(backbone)


def _inputs(tokenizer, data):
    inputs = span_qa_inputs(
        tokenizer, data.questions, data.contexts, data.answer_starts, data.answer_ends
    )
    return {k: v.numpy() for k, v in inputs.items()}


@pytest.mark.slow
def test_span_qa_trains_end_to_end_from_squad_json(tmp_path):
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=24)
    train = read_squad(_write_squad(tmp_path / "train.json", 2000, seed=0, bad=True))
    assert train.report.num_left_out == 1 and "broken" in str(train.report) and len(train) == 2000
    test = read_squad(_write_squad(tmp_path / "dev.json", 300, seed=1))
    inputs = _inputs(tokenizer, train)
    assert inputs["answer_in_window"].all()
    x = {k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    y = {"start_logits": inputs["start_positions"], "end_logits": inputs["end_positions"]}
    keras.utils.set_random_seed(0)
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(2e-3))
    model.fit(x, y, batch_size=32, epochs=4, verbose=0)

    inputs = _inputs(tokenizer, test)
    x = {k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    outputs = model.predict(x, verbose=0)
    starts, ends, _ = BertSpanQA.decode_spans(
        outputs["start_logits"], outputs["end_logits"], inputs["context_mask"], max_answer_length=5
    )
    starts, ends = np.asarray(starts), np.asarray(ends)
    # Spans back to text through the byte offsets: exact match with the answers.
    answers = [
        context.encode()[inputs["token_starts"][i, s] : inputs["token_ends"][i, e]].decode()
        for i, (context, s, e) in enumerate(zip(test.contexts, starts, ends, strict=True))
    ]
    exact = np.mean([a == b for a, b in zip(answers, test.answers, strict=True)])
    assert exact > 0.9


def test_decode_spans_picks_the_best_valid_span():
    start = np.array([[9.0, 0.0, 1.0, 5.0, 0.0, 8.0]])
    end = np.array([[9.0, 0.0, 4.0, 0.0, 2.0, 0.0]])
    context = np.array([[0, 0, 1, 1, 1, 0]])  # [CLS] and the last piece are not context
    s, e, score = BertSpanQA.decode_spans(start, end, context)
    # (3, 4) scores 7; (3, 2) would score 9 but ends before it starts; position 5 is outside.
    assert (int(s[0]), int(e[0]), float(score[0])) == (3, 4, 7.0)
    s, e, _ = BertSpanQA.decode_spans(start, end, context, max_answer_length=1)
    assert (int(s[0]), int(e[0])) == (2, 2)  # single-piece spans: 1+4 beats 5+0 and 0+2
    with pytest.raises(ValueError, match="max_answer_length=0"):
        BertSpanQA.decode_spans(start, end, context, max_answer_length=0)


def test_padding_positions_are_never_predicted():
    model = _model()
    x = {
        "token_ids": np.array([[2, 5, 3, 8, 3, 0, 0]]),
        "segment_ids": np.array([[0, 0, 0, 1, 1, 0, 0]]),
        "padding_mask": np.array([[1, 1, 1, 1, 1, 0, 0]]),
    }
    outputs = model(x)
    assert np.all(np.asarray(outputs["start_logits"])[0, 5:] <= -1e8)
    assert np.all(np.asarray(outputs["end_logits"])[0, 5:] <= -1e8)


def test_save_load_round_trip(tmp_path):
    model = _model()
    x = {
        "token_ids": np.array([[2, 5, 3, 8, 3, 0]]),
        "segment_ids": np.array([[0, 0, 0, 1, 1, 0]]),
        "padding_mask": np.array([[1, 1, 1, 1, 1, 0]]),
    }
    path = str(tmp_path / "qa.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertSpanQA)
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(restored(x)[key], model(x)[key], atol=1e-6)


def test_bad_arguments():
    with pytest.raises(TypeError, match="Expected a BertBackbone"):
        BertSpanQA(keras.layers.Dense(3))
