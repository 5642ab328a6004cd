"""BertBackbone: structure, sizes, ALBERT options, masks, serialization, bad input."""

import keras
import numpy as np
import pytest

from keras_attn.layers import TransformerEncoderBlock, gelu_approximate
from keras_attn.models import BERT_SIZES, BertBackbone, model_structure


def _inputs(batch=2, length=9, vocabulary_size=100, seed=0):
    rng = np.random.default_rng(seed)
    lengths = np.array([length, length - 4])[:batch]
    padding = (np.arange(length)[None] < lengths[:, None]).astype("int32")
    return {
        "token_ids": rng.integers(1, vocabulary_size, (batch, length)) * padding,
        "segment_ids": (np.arange(length)[None] >= 4).astype("int32").repeat(batch, 0) * padding,
        "padding_mask": padding,
    }


def _bert_parameter_count(V, L, H, I, P=512, S=2, E=None, shared="none"):  # noqa: E741 (the paper's names)
    """Counted from the papers' architecture, not from our model: ALBERT's `shared`
    sub-layers (attention and its LayerNorm, the feed-forward net and its) counted once."""
    E = E or H
    embeddings = V * E + S * E + P * E + 2 * E + (E * H + H if E != H else 0)
    attention = 4 * (H * H + H) + 2 * H
    feedforward = (H * I + I) + (I * H + H) + 2 * H
    attentions = 1 if shared in ("attention", "all") else L
    feedforwards = 1 if shared in ("feedforward", "all") else L
    return embeddings + attentions * attention + feedforwards * feedforward + H * H + H


@pytest.mark.parametrize("preset", ["tiny", "mini", "small"])
def test_presets_have_the_papers_sizes(preset):
    size = BERT_SIZES[preset]
    model = BertBackbone.from_size(preset, vocabulary_size=30522)
    H, L = size["hidden_dim"], size["num_layers"]
    assert model.count_params() == _bert_parameter_count(30522, L, H, 4 * H)


@pytest.mark.slow  # 4 s on the 2 busy cores: out of `make test-fast`
def test_base_is_the_papers_110m_parameters():
    # BERT-BASE: "L=12, H=768, A=12, Total Parameters=110M" (Devlin et al., 2018);
    # bert-base-uncased has 109.5M in its encoder and pooler.
    count = BertBackbone.from_size("base").count_params()
    assert count == _bert_parameter_count(30522, 12, 768, 3072)
    assert abs(count / 1e6 - 110) < 1
    assert BERT_SIZES["large"] == dict(num_layers=24, hidden_dim=1024, num_heads=16)


def test_outputs_and_padding_do_not_leak():
    model = BertBackbone.from_size("tiny", vocabulary_size=100, dropout=0.0)
    inputs = _inputs()
    outputs = model(inputs)
    assert tuple(outputs["sequence_output"].shape) == (2, 9, 128)
    assert tuple(outputs["pooled_output"].shape) == (2, 128)
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["token_ids"][1, 5:] = 7  # under padding
    again = model(changed)
    np.testing.assert_allclose(
        again["sequence_output"][1, :5], outputs["sequence_output"][1, :5], atol=1e-5
    )
    np.testing.assert_allclose(again["pooled_output"], outputs["pooled_output"], atol=1e-5)


def test_albert_factorised_embedding_and_shared_layers():
    model = BertBackbone(
        vocabulary_size=1000,
        num_layers=4,
        num_heads=4,
        hidden_dim=64,
        intermediate_dim=128,
        embedding_dim=16,
        share_layers=True,
    )
    assert model.count_params() == _bert_parameter_count(1000, 4, 64, 128, E=16, shared="all")
    assert model.share_layers == "all" and model.get_config()["share_layers"] == "all"
    assert tuple(model.token_embedding.embeddings.shape) == (1000, 16)
    assert len({id(layer) for layer in model.transformer_layers}) == 1
    out = model(_inputs(vocabulary_size=1000))
    assert tuple(out["sequence_output"].shape) == (2, 9, 64)


@pytest.mark.parametrize(
    "share_layers, paper_millions",
    [("none", 89), ("attention", 64), ("feedforward", 38), ("all", 12), (False, 89), (True, 12)],
)
def test_albert_sharing_modes_have_table_4s_parameter_counts(share_layers, paper_millions):
    # ALBERT-base with E = 128 (Lan et al., 2019, Table 4): not shared 89M,
    # shared-attention 64M, shared-FFN 38M, all-shared 12M; BERT's vocabulary size
    # is ALBERT's 30,000 SentencePiece pieces here.
    model = model_structure(
        lambda: BertBackbone(30000, 12, 12, 768, 3072, embedding_dim=128, share_layers=share_layers)
    )
    mode = {False: "none", True: "all"}.get(share_layers, share_layers)
    assert model.share_layers == mode
    count = model.count_params()
    assert count == _bert_parameter_count(30000, 12, 768, 3072, E=128, shared=mode)
    assert abs(count / 1e6 - paper_millions) < 1  # the table's millions, within rounding


@pytest.mark.parametrize("share_layers", ["attention", "feedforward"])
def test_partial_sharing_shares_one_sub_layer_trains_and_saves(share_layers, tmp_path):
    model = BertBackbone(100, 3, 2, 16, 32, dropout=0.0, share_layers=share_layers)
    first, *rest = model.transformer_layers
    shared = ["self_attention", "self_attention_layer_norm"]
    own = ["feedforward_intermediate_dense", "feedforward_output_dense", "feedforward_layer_norm"]
    if share_layers == "feedforward":
        shared, own = own, shared
    for block in rest:
        assert block is not first
        assert all(getattr(block, name) is getattr(first, name) for name in shared)
        assert all(getattr(block, name) is not getattr(first, name) for name in own)
    inputs = _inputs()
    expected = model(inputs)
    path = tmp_path / "albert.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert restored.get_config() == model.get_config()
    np.testing.assert_array_equal(restored(inputs)["sequence_output"], expected["sequence_output"])
    # One gradient step moves the shared kernel once, from every layer's gradient.
    kernel = (
        first.self_attention.query_dense.kernel
        if share_layers == "attention"
        else (first.feedforward_output_dense.kernel)
    )
    before = np.array(kernel)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.train_on_batch(
        inputs, {"sequence_output": np.ones((2, 9, 16)), "pooled_output": np.ones((2, 16))}
    )
    assert not np.allclose(before, np.array(kernel))
    with pytest.raises(ValueError, match=f"share_layers='{share_layers}'"):
        model.save_pretrained(tmp_path / "hf")


def test_sharing_modes_are_checked():
    with pytest.raises(
        ValueError, match="Expected `share_layers` in .*Received: share_layers='ffn'"
    ):
        BertBackbone(100, 2, 2, 16, 32, share_layers="ffn")
    block = TransformerEncoderBlock(2, 32)
    with pytest.raises(ValueError, match="`shared_attention` to be built"):
        TransformerEncoderBlock(2, 32, shared_attention=block)(np.zeros((1, 3, 16)))
    with pytest.raises(TypeError, match="shared_feedforward` to be a TransformerEncoderBlock"):
        TransformerEncoderBlock(2, 32, shared_feedforward="first")
    block(np.zeros((1, 3, 16)))
    with pytest.raises(ValueError, match="width of `shared_attention` \\(16\\)"):
        TransformerEncoderBlock(2, 32, shared_attention=block)(np.zeros((1, 3, 8)))


def test_pre_ln_adds_a_final_layer_norm_and_scores_are_configurable():
    model = BertBackbone.from_size("tiny", vocabulary_size=100, norm_first=True, score="cosine")
    assert model.final_layer_norm is not None
    assert type(model.transformer_layers[0].self_attention.score_layer).__name__ == "CosineScore"
    assert np.all(np.isfinite(model(_inputs())["sequence_output"]))


def test_save_load_and_config_round_trip(tmp_path):
    model = BertBackbone.from_size(
        "tiny", vocabulary_size=100, activation=gelu_approximate, score="additive", embedding_dim=32
    )
    inputs = _inputs()
    expected = model(inputs)
    path = str(tmp_path / "bert.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertBackbone) and restored.get_config() == model.get_config()
    for key in expected:
        np.testing.assert_array_equal(restored(inputs)[key], expected[key])


@pytest.mark.slow  # 4 s on the 2 busy cores: out of `make test-fast`
def test_fit_step_moves_weights():
    model = BertBackbone.from_size("tiny", vocabulary_size=100)
    inputs = _inputs()
    head = keras.layers.Dense(2)(model.output["pooled_output"])
    classifier = keras.Model(model.input, head)
    classifier.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = np.array(model.pooled_dense.kernel)
    classifier.fit(inputs, np.array([0, 1]), epochs=1, verbose=0)
    assert not np.allclose(before, model.pooled_dense.kernel)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(vocabulary_size=0), "vocabulary_size=0"),
        (dict(num_heads=3), r"hidden_dim=128, num_heads=3"),
        (dict(dropout=1.5), "dropout=1.5"),
        (dict(embedding_dim=-1), "embedding_dim=-1"),
        (dict(score="luong"), "score='luong'"),
    ],
)
def test_bad_arguments(kwargs, match):
    config = dict(
        vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=128, intermediate_dim=64
    )
    config.update(kwargs)
    with pytest.raises(ValueError, match=match):
        BertBackbone(**config)
    with pytest.raises(ValueError, match="size='huge'"):
        BertBackbone.from_size("huge")


def test_too_long_inputs_raise():
    model = BertBackbone.from_size("tiny", vocabulary_size=100, max_sequence_length=8)
    with pytest.raises(ValueError, match="Sequence too long"):
        model(_inputs(length=9))
