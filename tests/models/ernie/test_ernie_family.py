"""ERNIE's backbone through the shared harness on TensorFlow, JAX and PyTorch (builds,
runs, masks, mixed precision, a training step, `.keras` round trip, hidden states),
LoRA, layout maps; the entity vectors it reads and the ones it refuses."""

import numpy as np
import pytest

from keras_attn.models import ErnieBackbone, model_structure
from tests import model_harness as harness

pytestmark = pytest.mark.backends("tensorflow", "jax", "torch")
ENTITIES = 12
SIZE = dict(
    num_layers=1, num_knowledge_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
    entity_dim=8, entity_num_heads=2, max_sequence_length=8, dropout=0.0,
)  # fmt: skip
tiny_ernie = harness.seeded(
    lambda **o: ErnieBackbone(harness.VOCABULARY, ENTITIES, **{**SIZE, **o})
)


def _inputs():
    x = harness.encoder_inputs()
    x["entity_ids"] = np.array([[0, 3, 0, 7, 0, 0, 12, 0], [5, 0, 0, 0, 9, 0, 0, 0]], "int32")
    return x


def test_the_backbone_through_the_harness(tmp_path):
    shapes = {"sequence_output": (2, 8, 16), "entity_output": (2, 8, 8), "pooled_output": (2, 16)}
    harness.run_backbone_test(
        lambda **o: tiny_ernie(freeze_entities=False, **o),
        _inputs(),
        shapes,
        tmp_path,
        "padding",
        "sequence_output",
        # Row 0 of the entity table is never read; a key bias adds the same q·b_k to
        # every score of a query, so its gradient is zero up to rounding.
        no_gradient=("entity_embedding/embeddings", "key/bias"),
    )


def test_entities_reach_their_tokens_and_the_vectors_load(tmp_path):
    import keras

    model = tiny_ernie()
    assert not model.entity_embedding.trainable  # TransE's vectors, frozen
    model.save(tmp_path / "ernie.keras")  # and frozen again once reloaded (JAX was not)
    assert not keras.saving.load_model(tmp_path / "ernie.keras").entity_embedding.trainable
    x = _inputs()
    base = harness.to_numpy(model(x)["sequence_output"])
    vectors = np.random.default_rng(0).normal(size=(ENTITIES, 8)).astype("float32")
    model.set_entity_vectors(vectors)
    table = harness.to_numpy(model.entity_embedding.embeddings)
    assert (table[0] == 0).all() and np.array_equal(table[1:], vectors)
    moved = np.abs(harness.to_numpy(model(x)["sequence_output"]) - base).max(-1)
    has_entity = x["entity_ids"] > 0
    assert moved[has_entity].min() > 1e-6  # the K-Encoder mixes each entity in
    with pytest.raises(ValueError, match=r"shape \(12, 8\)"):
        model.set_entity_vectors(vectors[:5])
    with pytest.raises(ValueError, match="finite"):
        model.set_entity_vectors(np.full((ENTITIES, 8), np.nan))
    with pytest.raises(ValueError, match="`entity_dim` divisible by `entity_num_heads`"):
        ErnieBackbone(40, 5, **{**SIZE, "entity_dim": 9})
    with pytest.raises(ValueError, match="num_entities"):
        ErnieBackbone(40, 0, **SIZE)


def test_lora_and_layout_maps(tmp_path):
    deeper = harness.seeded(lambda: tiny_ernie(num_knowledge_layers=3))
    harness.run_lora_test(tiny_ernie, _inputs(), tmp_path, "sequence_output", deeper)
    import keras

    devices = [f"cpu:{i}" for i in range(8)]
    mesh = keras.distribution.DeviceMesh((2, 4), ["batch", "model"], devices)
    structure = model_structure(lambda: ErnieBackbone.from_size("base", num_entities=82115))
    layouts = structure.get_layout_map(mesh)
    assert layouts["knowledge_layer_0/fusion_token_dense/kernel"].axes == ("batch", "model")
    assert layouts["knowledge_layer_0/token_output_dense/kernel"].axes == ("model", "batch")
    assert layouts["entity_embedding/embeddings"] is not None


@pytest.mark.slow  # 10 s: fits five epochs and round-trips a .keras file
def test_entity_typing_on_ernie_and_on_bert(tmp_path):
    """The typing head fits with its own defaults on both backbones (the text-only
    control is BERT's), reads the marker's position, and refuses other backbones."""
    from keras_attn.models import BertBackbone, EntityTyping, XLNetBackbone

    x = {**_inputs(), "marker_positions": np.array([1, 3], "int32")}
    ernie = harness.seeded(lambda dtype=None: EntityTyping(tiny_ernie(dtype=dtype), 4))
    model = harness.run_task_test(ernie, x, np.array([0, 3]), tmp_path)
    assert model.compute_dtype == "float32"
    moved = dict(x, marker_positions=np.array([2, 3], "int32"))  # row 0 reads token 2
    a, b = (harness.to_numpy(model(v)) for v in (x, moved))
    assert np.abs(a[0] - b[0]).max() > 1e-6 and np.abs(a[1] - b[1]).max() == 0.0
    # The text-only control: the same head on BERT's backbone, no entity input.
    text_only = {k: v for k, v in x.items() if k != "entity_ids"}
    control = EntityTyping(harness.tiny_bert(), 4)
    assert "entity_ids" not in control.input and control(text_only).shape == (2, 4)
    with pytest.raises(TypeError, match="an ErnieBackbone or a BertBackbone"):
        EntityTyping(XLNetBackbone(40, **harness.SIZE), 4)
    with pytest.raises(ValueError, match="num_classes"):
        EntityTyping(tiny_ernie(), 1)
    assert isinstance(control.backbone, BertBackbone)


def _pretraining_inputs():
    return {**_inputs(), "masked_positions": np.array([[1, 2], [3, 0]], "int32"),
         "entity_candidates": np.array([[3, 7, 12], [5, 9, 0]], "int32")}  # fmt: skip


def test_dea_head_equals_the_formula():
    """dEA's logits are `linear(w_i) . e_j` over the row's candidates (transcribed loop
    by loop), padding candidates never chosen; the layers nothing reads (the last
    block's entity output, the pooler without a sentence head) are left out of training."""
    from keras_attn.models import ErniePretrainer

    x = _pretraining_inputs()
    model = harness.seeded(lambda: ErniePretrainer(tiny_ernie(), sentence_objective="none"))()
    outputs = {k: harness.to_numpy(v) for k, v in model(x).items()}
    sequence = harness.to_numpy(model.backbone(_inputs())["sequence_output"])
    kernel, bias = (harness.to_numpy(w) for w in model.entity_head.dense.weights)
    table = harness.to_numpy(model.backbone.entity_embedding.embeddings)
    for b in range(2):
        for i in range(8):
            query = [sum(sequence[b, i, k] * kernel[k, d] for k in range(16)) + bias[d]
                     for d in range(8)]  # fmt: skip
            for j, entity in enumerate(x["entity_candidates"][b]):
                expected = sum(query[d] * table[entity, d] for d in range(8))
                if entity == 0:
                    assert outputs["dea_logits"][b, i, j] < -1e8
                else:
                    assert abs(outputs["dea_logits"][b, i, j] - expected) < 1e-5
    assert outputs["mlm_logits"].shape == (2, 2, harness.VOCABULARY)
    unread = {"knowledge_layer_1/entity_output_dense/kernel", "pooled_dense/kernel"}
    assert not unread & {w.path for w in model.trainable_weights}
    # dEA's default loss is a mean over the linked tokens, not over every position.
    model.compile()
    labels = np.array([[0, 0, 0, 1, 0, 0, 2, 0], [0, 0, 0, 0, 1, 0, 0, 0]], "int32")
    weights = (_inputs()["entity_ids"] > 0).astype("float32")
    y = {"mlm_logits": np.array([[5, 6], [7, 0]]), "dea_logits": labels}
    w = {"mlm_logits": np.ones((2, 2), "float32"), "dea_logits": weights}
    got = model.evaluate(x, y, sample_weight=w, verbose=0, return_dict=True)["dea_logits_loss"]
    logits = outputs["dea_logits"]
    log_p = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
    log_p -= logits.max(-1, keepdims=True)
    chosen = np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    assert abs(got - (-(chosen * weights).sum() / weights.sum())) < 1e-4
    with pytest.raises(TypeError, match="ErnieBackbone"):
        ErniePretrainer(harness.tiny_bert())


@pytest.mark.slow  # 8 s: fits five epochs and round-trips a .keras file
def test_the_pretrainer_fits_and_reloads(tmp_path):
    from keras_attn.models import ErniePretrainer

    x = _pretraining_inputs()
    y = {"mlm_logits": np.array([[5, 6], [7, 0]]), "dea_logits": np.zeros((2, 8), "int32")}
    harness.run_task_test(
        harness.seeded(lambda: ErniePretrainer(tiny_ernie(), sentence_objective="none")),
        x, y, tmp_path,
    )  # fmt: skip


def test_dea_corruption_rates_and_targets():
    from keras_attn.models import dea_inputs

    entity_ids = np.random.default_rng(0).integers(0, 4, (400, 50)) * 7  # 0, 7, 14, 21
    out = dea_inputs(entity_ids, num_entities=30, seed=3)
    aligned = entity_ids > 0
    removed = (out["entity_ids"] == 0) & aligned
    changed = (out["entity_ids"] != entity_ids) & aligned & ~removed
    assert abs(removed.sum() / aligned.sum() - 0.15) < 0.01
    assert abs(changed.sum() / aligned.sum() - 0.05 * 29 / 30) < 0.01  # a draw may repeat
    assert (out["entity_ids"][~aligned] == 0).all()
    assert np.array_equal(out["dea_weights"] > 0, aligned)  # every aligned token a target
    rows = np.arange(400)[:, None]
    picked = out["entity_candidates"][rows, out["dea_labels"]]
    assert np.array_equal(picked[aligned], entity_ids[aligned])  # the original entity
    again = dea_inputs(entity_ids, num_entities=30, seed=3)
    assert all(np.array_equal(out[k], again[k]) for k in out)
    cut = dea_inputs(np.array([[7, 3, 9, 3]]), num_entities=9, max_candidates=2)
    assert cut["entity_candidates"].tolist() == [[7, 3]]
    assert cut["dea_weights"].tolist() == [[1.0, 1.0, 0.0, 1.0]]
    with pytest.raises(ValueError, match=r"in \[0, num_entities=9\]"):
        dea_inputs(np.array([[10]]), num_entities=9)
    with pytest.raises(ValueError, match="replace_rate \\+ remove_rate"):
        dea_inputs(np.array([[1]]), 9, replace_rate=0.6, remove_rate=0.6)
    with pytest.raises(ValueError, match="int array"):
        dea_inputs(np.array([1.0]), 9)


def test_from_bert_is_bert_where_there_is_no_entity():
    """Zhang et al.'s initialisation: BERT's lower blocks make the T-Encoder, its upper
    blocks the token half of the fusion blocks, so a sequence without entities gives
    BERT's outputs exactly, and an entity moves its own token and, a block later, the
    others."""
    bert = harness.tiny_bert(num_layers=3)
    ernie = ErnieBackbone.from_bert(bert, ENTITIES, num_layers=1, entity_dim=8,
                                    entity_num_heads=2)  # fmt: skip
    assert (ernie.num_layers, ernie.num_knowledge_layers) == (1, 2)
    x = harness.encoder_inputs()
    reference = {k: harness.to_numpy(v) for k, v in bert(x).items()}
    plain = ernie({**x, "entity_ids": np.zeros_like(x["token_ids"])})
    for key in ("sequence_output", "pooled_output"):
        assert harness.max_abs_diff(plain[key], reference[key]) < 1e-6
    linked = harness.to_numpy(ernie(_inputs())["sequence_output"])
    assert np.abs(linked - reference["sequence_output"]).max() > 1e-4
    with pytest.raises(ValueError, match="norm_first=False"):
        ErnieBackbone.from_bert(harness.tiny_bert(norm_first=True), ENTITIES, entity_dim=8)
    with pytest.raises(ValueError, match=r"`num_layers` an int in \[1, 1\]"):
        ErnieBackbone.from_bert(harness.tiny_bert(), ENTITIES, num_layers=2, entity_dim=8)
    with pytest.raises(TypeError, match="a BertBackbone"):
        ErnieBackbone.from_bert(ernie, ENTITIES)
