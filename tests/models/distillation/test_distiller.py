"""Distiller and student_from_teacher: the loss equals a NumPy transcription of the
papers' terms; the teacher stays frozen and in inference mode; students start from
every k-th teacher layer; classification and masked-LM; `.keras` round trips; bad
arguments are named."""

import keras
import numpy as np
import pytest

from keras_attn.models import (
    BertBackbone,
    BertClassifier,
    BertPretrainer,
    Distiller,
    student_from_teacher,
)

# A few steps of a small model each, the traced steps being the family's and
# tests/training's: run eagerly (conftest.py's `eager`), about 60% of the traced time.
pytestmark = pytest.mark.eager

VOCAB = 40


def _backbone(layers=4, hidden=16, heads=2, dropout=0.0, vocabulary_size=VOCAB):
    return BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=2 * hidden,
        max_sequence_length=12,
        dropout=dropout,
    )


def _inputs(batch=6, length=7, seed=0):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(4, VOCAB, (batch, length)).astype("int32")
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[1, 4:] = padding_mask[2, 2:] = 0
    token_ids[padding_mask == 0] = 0
    return {
        "token_ids": token_ids,
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": padding_mask,
    }


def _perturb(model, seed=1):
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(np.asarray(variable) + rng.normal(0, 0.2, variable.shape))
    return model


def test_intermediate_outputs_are_the_backbones_computation():
    backbone = _perturb(_backbone())
    x = _inputs()
    features = backbone.intermediate_outputs(x, training=False)
    outputs = backbone(x)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(features[key], outputs[key], atol=1e-6)
    np.testing.assert_allclose(features["hidden_states"][-1], outputs["sequence_output"], atol=1e-6)
    assert len(features["hidden_states"]) == len(features["attention"]) == 4
    assert tuple(features["attention"][0].shape) == (6, 2, 7, 7)
    assert tuple(features["embeddings"].shape) == (6, 7, 16)


def test_student_from_teacher_copies_every_kth_layer_and_the_head():
    teacher = _perturb(BertClassifier(_backbone(layers=6), num_classes=3, dropout=0.0))
    student = student_from_teacher(teacher, 3)
    assert isinstance(student, BertClassifier) and student.backbone.num_layers == 3
    for mine, index in zip(student.backbone.transformer_layers, (2, 4, 6), strict=True):
        theirs = teacher.backbone.transformer_layers[index - 1]
        for a, b in zip(mine.weights, theirs.weights, strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for name in ("token_embedding", "position_embedding", "embeddings_layer_norm", "pooled_dense"):
        for a, b in zip(
            getattr(student.backbone, name).weights,
            getattr(teacher.backbone, name).weights,
            strict=True,
        ):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(
        np.asarray(student.output_dense.kernel), np.asarray(teacher.output_dense.kernel)
    )
    # As deep as the teacher: the same model.
    x = _inputs()
    np.testing.assert_allclose(student_from_teacher(teacher, 6)(x), teacher(x), atol=1e-6)
    # A chosen map, and a bare backbone.
    backbone = student_from_teacher(teacher.backbone, 2, layer_map=[1, 5])
    for a, b in zip(
        backbone.transformer_layers[1].weights,
        teacher.backbone.transformer_layers[4].weights,
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _kl_rows(p, q):
    return np.sum(p * (np.log(p + 1e-8) - np.log(q + 1e-8)), axis=-1)


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_loss_equals_the_papers_terms_transcribed():
    teacher = _perturb(BertClassifier(_backbone(layers=4, hidden=16), 3, dropout=0.0))
    student = _perturb(BertClassifier(_backbone(layers=2, hidden=8), 3, dropout=0.0), seed=2)
    weights = dict(task_weight=0.7, output_weight=1.3, hidden_weight=0.5, attention_weight=2.0)
    distiller = Distiller(teacher, student, temperature=3.0, **weights)
    _perturb(distiller.embedding_projection, 3)
    _perturb(distiller.hidden_projection, 4)
    x, labels = _inputs(), np.array([0, 1, 2, 0, 1, 2])
    y_pred = distiller(x, training=False)
    loss = float(distiller.compute_loss(x, labels, y_pred, training=False))

    # Transcription: every term from the two models' own outputs.
    t = teacher.backbone.intermediate_outputs(x, training=False)
    s = student.backbone.intermediate_outputs(x, training=False)
    t_logits, s_logits = np.asarray(teacher(x)), np.asarray(student(x))
    np.testing.assert_allclose(np.asarray(y_pred), s_logits, atol=1e-6)
    task = -np.mean(_log_softmax(s_logits)[np.arange(6), labels])
    soft_t, soft_s = _log_softmax(t_logits / 3.0), _log_softmax(s_logits / 3.0)
    output = 9.0 * np.mean(np.sum(np.exp(soft_t) * (soft_t - soft_s), -1))
    real = x["padding_mask"].astype(bool)
    w_e = np.asarray(distiller.embedding_projection.kernel)
    w_h = np.asarray(distiller.hidden_projection.kernel)
    pairs = [(np.asarray(s["embeddings"]) @ w_e, np.asarray(t["embeddings"]))]
    pairs += [
        (np.asarray(s["hidden_states"][i]) @ w_h, np.asarray(t["hidden_states"][j]))
        for i, j in ((0, 1), (1, 3))  # uniform map 4 -> 2: teacher layers 2 and 4
    ]
    hidden = np.mean([np.mean((a - b)[real] ** 2) for a, b in pairs])
    attention = np.mean(
        [
            np.mean(
                _kl_rows(np.asarray(t["attention"][j]), np.asarray(s["attention"][i])).mean(1)[real]
            )
            for i, j in ((0, 1), (1, 3))
        ]
    )
    expected = 0.7 * task + 1.3 * output + 0.5 * hidden + 2.0 * attention
    assert min(task, output, hidden, attention) > 1e-3  # every term counts
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


@pytest.mark.slow  # 4 s on the 2 busy cores: out of `make test-fast`
def test_teacher_frozen_in_inference_mode_student_learns():
    teacher = BertClassifier(_backbone(dropout=0.5), 2, dropout=0.5)
    student = student_from_teacher(teacher, 2)
    distiller = Distiller(teacher, student, hidden_weight=1.0, attention_weight=1.0)
    distiller.compile(optimizer=keras.optimizers.Adam(1e-2))
    teacher_before = [np.asarray(v).copy() for v in teacher.weights]
    student_before = [np.asarray(v).copy() for v in student.weights]
    assert not {id(v) for v in teacher.weights} & {id(v) for v in distiller.trainable_variables}
    x, labels = _inputs(batch=8), np.array([0, 1] * 4)
    history = distiller.fit(x, labels, epochs=3, batch_size=4, verbose=0).history
    assert set(history) == {
        "loss",
        "accuracy",
        "task_loss",
        "output_loss",
        "hidden_loss",
        "attention_loss",
    }
    for before, after in zip(teacher_before, teacher.weights, strict=True):
        np.testing.assert_array_equal(before, np.asarray(after))
    changed = [
        not np.array_equal(b, np.asarray(a))
        for b, a in zip(student_before, student.weights, strict=True)
    ]
    assert sum(changed) > len(changed) // 2
    # The teacher's half of the pass has no dropout, even in training.
    distiller(x, training=True)
    _, teacher_logits, _ = distiller._last
    np.testing.assert_allclose(teacher_logits, teacher(x, training=False), atol=1e-6)


@pytest.mark.slow  # over 10 s: left out of `make test-fast`
def test_masked_lm_distillation_and_keras_round_trip(tmp_path):
    teacher = _perturb(BertPretrainer(_backbone(layers=4), sentence_objective="nsp"))
    student = student_from_teacher(teacher, 2)
    assert isinstance(student, BertPretrainer) and student.sentence_objective == "nsp"
    distiller = Distiller(teacher, student, hidden_weight=1.0, attention_weight=1.0)
    distiller.compile(optimizer=keras.optimizers.Adam(1e-3))
    x = {**_inputs(batch=8), "masked_positions": np.tile([[1, 2, 0]], (8, 1)).astype("int32")}
    y = {
        "mlm_logits": np.tile([[5, 6, 0]], (8, 1)).astype("int32"),
        "nsp_logits": np.array([0, 1] * 4),
    }
    weights = {"mlm_logits": np.tile([[1.0, 1.0, 0.0]], (8, 1)), "nsp_logits": np.ones(8)}
    history = distiller.fit(x, y, sample_weight=weights, epochs=2, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    y_pred = distiller(x)
    assert set(y_pred) == {"mlm_logits", "nsp_logits"}
    path = tmp_path / "distiller.keras"
    distiller.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, Distiller) and restored.layer_map == [2, 4]
    for key, value in distiller.student(x).items():
        np.testing.assert_allclose(restored.student(x)[key], value, atol=1e-6)
    np.testing.assert_allclose(
        float(restored.compute_loss(x, y, restored(x), weights, training=False)),
        float(distiller.compute_loss(x, y, distiller(x), weights, training=False)),
        rtol=1e-5,
    )


def test_different_head_counts_compare_mean_maps():
    teacher = BertClassifier(_backbone(layers=2, heads=4), 2)
    student = BertClassifier(_backbone(layers=1, heads=2), 2)
    distiller = Distiller(teacher, student, attention_weight=1.0)
    x = _inputs()
    loss = distiller.compute_loss(x, np.zeros(6, "int32"), distiller(x), training=False)
    assert np.isfinite(float(loss))


def test_bad_arguments_are_named():
    teacher = BertClassifier(_backbone(), 2)
    with pytest.raises(ValueError, match=r"vocabulary_size 40 \(teacher\) and 41 \(student\)"):
        Distiller(teacher, BertClassifier(_backbone(vocabulary_size=41), 2))
    with pytest.raises(ValueError, match="num_classes 2 .* and 3"):
        Distiller(teacher, BertClassifier(_backbone(), 3))
    with pytest.raises(ValueError, match=r"teacher layer in \[1, 4\].*layer_map=\[1, 5\]"):
        Distiller(teacher, student_from_teacher(teacher, 2), layer_map=[1, 5])
    with pytest.raises(ValueError, match=r"teacher layer in \[1, 4\].*layer_map=\[0\]"):
        student_from_teacher(teacher, 1, layer_map=[0])
    with pytest.raises(ValueError, match="num_layers` <= the teacher's 4"):
        student_from_teacher(teacher, 5)
    with pytest.raises(TypeError, match="one kind"):
        Distiller(teacher, BertPretrainer(_backbone()))
    with pytest.raises(TypeError, match="student of type BertBackbone"):
        Distiller(teacher, _backbone())
    with pytest.raises(ValueError, match="hidden_weight=-1"):
        Distiller(teacher, student_from_teacher(teacher, 2), hidden_weight=-1)
    with pytest.raises(ValueError, match="temperature"):
        Distiller(teacher, student_from_teacher(teacher, 2), temperature=0)
    with pytest.raises(ValueError, match="share_layers=.all."):
        student_from_teacher(
            BertBackbone(
                vocabulary_size=VOCAB,
                num_layers=2,
                num_heads=2,
                hidden_dim=8,
                intermediate_dim=8,
                max_sequence_length=8,
                share_layers=True,
            ),
            1,
        )
