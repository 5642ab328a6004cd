"""ELECTRA, ALBERT and DistilBERT checkpoints (and BERT's, by `model_type`) load into
`BertBackbone`: randomly initialised `transformers` models, every parameter perturbed so
that no LayerNorm is the identity, saved with `save_pretrained`; the hidden states agree
within 1e-5 on the real tokens."""

import json
import warnings

import numpy as np
import pytest
import torch

from keras_attn.models import BertBackbone

VOCABULARY_SIZE, LENGTH = 60, 9


def _configs():
    import transformers

    sizes = dict(vocab_size=VOCABULARY_SIZE, max_position_embeddings=16)
    return {
        "bert": transformers.BertConfig(
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=24,
            type_vocab_size=3,
            **sizes,
        ),
        # A generator-sized ELECTRA: embeddings wider than the encoder, projected down.
        "electra": transformers.ElectraConfig(
            embedding_size=24,
            hidden_size=16,
            num_hidden_layers=3,
            num_attention_heads=2,
            intermediate_size=32,
            **sizes,
        ),
        "electra-unprojected": transformers.ElectraConfig(
            embedding_size=16,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            hidden_act="gelu_new",
            **sizes,
        ),
        "albert": transformers.AlbertConfig(
            embedding_size=8,
            hidden_size=16,
            num_hidden_layers=3,
            num_attention_heads=4,
            intermediate_size=24,
            **sizes,
        ),
        "distilbert": transformers.DistilBertConfig(
            dim=16, n_layers=2, n_heads=2, hidden_dim=40, **sizes
        ),
    }


def _save_random(config, folder, cls=None, seed=0):
    import transformers

    torch.manual_seed(seed)
    model = (cls(config) if cls else transformers.AutoModel.from_config(config)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    model.save_pretrained(folder)
    return model


def _inputs(with_segments=True):
    rng = np.random.default_rng(0)
    token_ids = rng.integers(5, VOCABULARY_SIZE, (3, LENGTH)).astype("int32")
    padding_mask = np.ones((3, LENGTH), "int32")
    padding_mask[1, 6:] = padding_mask[2, 3:] = 0
    token_ids[padding_mask == 0] = 0
    segment_ids = np.zeros((3, LENGTH), "int32")
    if with_segments:
        segment_ids[:, 4:] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def _theirs(model, x, with_segments=True):
    kwargs = dict(
        input_ids=torch.from_numpy(x["token_ids"]).long(),
        attention_mask=torch.from_numpy(x["padding_mask"]).long(),
    )
    if with_segments:
        kwargs["token_type_ids"] = torch.from_numpy(x["segment_ids"]).long()
    with torch.no_grad():
        return model(**kwargs, output_hidden_states=True)


@pytest.mark.parametrize(
    "family", ["bert", "electra", "electra-unprojected", "albert", "distilbert"]
)
def test_hidden_states_match_transformers(family, tmp_path):
    config = _configs()[family]
    reference = _save_random(config, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a bare model's checkpoint has nothing unused
        ours = BertBackbone.from_pretrained(tmp_path)
    with_segments = family != "distilbert"
    x = _inputs(with_segments)
    theirs = _theirs(reference, x, with_segments)
    outputs = ours(x)
    real = x["padding_mask"].astype(bool)
    difference = np.abs(
        np.asarray(outputs["sequence_output"])[real] - theirs.last_hidden_state.numpy()[real]
    )
    assert difference.max() <= 1e-5, difference.max()
    # Every layer's hidden states too (the embeddings, projected where factorised, first).
    states = ours.hidden_states(x)
    layers = getattr(config, "num_hidden_layers", None) or config.n_layers
    assert len(states) == len(theirs.hidden_states) == layers + 1
    for mine, reference_state in zip(states, theirs.hidden_states, strict=True):
        difference = np.abs(np.asarray(mine)[real] - reference_state.numpy()[real])
        assert difference.max() <= 1e-5, difference.max()
    if family in ("bert", "albert"):  # the families with a tanh pooler on [CLS]
        pooled = np.abs(np.asarray(outputs["pooled_output"]) - theirs.pooler_output.numpy())
        assert pooled.max() <= 1e-5
    if family == "albert":  # one block, run num_layers times
        assert ours.share_layers and len({id(b) for b in ours.transformer_layers}) == 1
    if family == "distilbert":  # no segment embedding: ours adds zeros, whatever the ids
        assert not np.any(np.asarray(ours.segment_embedding.embeddings))


@pytest.mark.parametrize("head", ["ElectraForPreTraining", "ElectraForMaskedLM"])
def test_electra_task_checkpoints_load_their_backbone_and_list_the_head(head, tmp_path):
    import transformers

    config = _configs()["electra"]
    reference = _save_random(config, tmp_path, getattr(transformers, head))
    with pytest.warns(UserWarning, match="not used by BertBackbone: (discriminator|generator)_"):
        ours = BertBackbone.from_pretrained(tmp_path)
    x = _inputs()
    theirs = _theirs(reference.electra, x)
    real = x["padding_mask"].astype(bool)
    difference = (
        np.asarray(ours(x)["sequence_output"])[real] - theirs.last_hidden_state.numpy()[real]
    )
    assert np.abs(difference).max() <= 1e-5
    assert all(
        name.startswith("generator_") or name.startswith("discriminator_")
        for name in (ours.unused_checkpoint_variables)
    )


def _write(folder, config, family="bert"):
    _save_random(_configs()[family], folder)
    saved = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**saved, **config}))


def test_configurations_we_cannot_read_are_named(tmp_path):
    _write(tmp_path / "roberta", {"model_type": "roberta"})
    with pytest.raises(ValueError, match=r"config.json: Expected model_type in .*'roberta'"):
        BertBackbone.from_pretrained(tmp_path / "roberta")
    _write(tmp_path / "groups", {"num_hidden_groups": 2}, "albert")
    with pytest.raises(ValueError, match="num_hidden_groups=2"):
        BertBackbone.from_pretrained(tmp_path / "groups")
    _write(tmp_path / "square", {"embedding_size": 16}, "albert")
    with pytest.raises(ValueError, match="embedding_size=16, hidden_size=16"):
        BertBackbone.from_pretrained(tmp_path / "square")
    _write(tmp_path / "distil", {"n_heads": 3}, "distilbert")
    with pytest.raises(ValueError, match="dim divisible by n_heads"):
        BertBackbone.from_pretrained(tmp_path / "distil")


def test_overrides_the_checkpoint_does_not_have_are_refused(tmp_path):
    _save_random(_configs()["bert"], tmp_path)
    with pytest.raises(ValueError, match="share_layers=.all."):
        BertBackbone.from_pretrained(tmp_path, share_layers=True)
    with pytest.raises(ValueError, match="no weights for .*embedding_projection"):
        BertBackbone.from_pretrained(tmp_path, embedding_dim=8)
    # An override that changes no weight is taken.
    assert BertBackbone.from_pretrained(tmp_path, dropout=0.0).dropout == 0.0


def _perturbed(backbone):
    """Every weight moved off its initialisation (LayerNorms are no longer the identity)."""
    rng = np.random.default_rng(1)
    for variable in backbone.weights:
        value = np.asarray(variable)
        variable.assign(value + 0.1 * rng.standard_normal(value.shape).astype("float32"))
    return backbone


@pytest.mark.parametrize(
    "family, kwargs",
    [
        ("bert", dict(num_segments=3)),
        ("electra", dict(embedding_dim=8)),
        ("albert", dict(embedding_dim=8, share_layers=True)),
        ("distilbert", dict(activation="relu")),
    ],
)
def test_save_pretrained_loads_in_transformers_with_the_same_outputs(family, kwargs, tmp_path):
    import transformers

    ours = _perturbed(
        BertBackbone(
            VOCABULARY_SIZE,
            num_layers=2,
            num_heads=2,
            hidden_dim=16,
            intermediate_dim=24,
            max_sequence_length=16,
            **kwargs,
        )
    )
    if family == "distilbert":  # DistilBERT has no segments: a backbone without them
        ours.segment_embedding.embeddings.assign(np.zeros((2, 16), "float32"))
    folder = ours.save_pretrained(tmp_path, model_type=None if family != "distilbert" else family)
    assert json.loads((folder / "config.json").read_text())["model_type"] == family
    theirs = transformers.AutoModel.from_pretrained(folder).eval()
    assert type(theirs).__name__.lower() == f"{family}model"
    with_segments = family != "distilbert"
    x = _inputs(with_segments)
    if family == "bert":
        x["segment_ids"][0, 6:] = 2  # the third segment id is written too
    outputs, reference = ours(x), _theirs(theirs, x, with_segments)
    real = x["padding_mask"].astype(bool)
    difference = np.abs(
        np.asarray(outputs["sequence_output"])[real] - reference.last_hidden_state.numpy()[real]
    )
    assert difference.max() <= 1e-5, difference.max()
    if family in ("bert", "albert"):
        pooled = np.asarray(outputs["pooled_output"]) - reference.pooler_output.numpy()
        assert np.abs(pooled).max() <= 1e-5
    # And back: our reader gives the very same backbone.
    again = BertBackbone.from_pretrained(folder)
    np.testing.assert_array_equal(
        np.asarray(again(x)["sequence_output"]), np.asarray(outputs["sequence_output"])
    )


def test_save_pretrained_writes_a_tokenizer_transformers_reads(tmp_path):
    import transformers

    from keras_attn.data import WordPieceTokenizer

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "good", "."]
    tokenizer = WordPieceTokenizer(vocabulary, sequence_length=8)
    backbone = BertBackbone(len(vocabulary), 1, 2, 8, 16, max_sequence_length=8)
    backbone.save_pretrained(tmp_path, tokenizer=tokenizer)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    ours = tokenizer(["The film was good."])
    real = ours["padding_mask"][0].numpy() == 1
    assert theirs("The film was good.")["input_ids"] == ours["token_ids"][0].numpy()[real].tolist()


def test_save_pretrained_refuses_what_the_family_cannot_hold(tmp_path):
    def backbone(**kwargs):
        return BertBackbone(VOCABULARY_SIZE, 1, 2, 16, 24, max_sequence_length=16, **kwargs)

    with pytest.raises(ValueError, match="score='cosine'"):
        backbone(score="cosine").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="norm_first=True"):
        backbone(norm_first=True).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="activation"):
        backbone(activation="silu").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="no weights for .*embedding_projection"):
        backbone(embedding_dim=8).save_pretrained(tmp_path, model_type="bert")
    with pytest.raises(ValueError, match="segment_embedding.* is not zero"):
        _perturbed(backbone()).save_pretrained(tmp_path, model_type="distilbert")
    with pytest.raises(ValueError, match="model_type='gpt2'"):
        backbone().save_pretrained(tmp_path, model_type="gpt2")
    assert not any(tmp_path.iterdir())  # nothing written by a refused call
