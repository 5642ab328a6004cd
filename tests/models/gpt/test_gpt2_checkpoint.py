"""GPT-2 in and out of `GPTLanguageModel`: randomly initialised `transformers` GPT-2s
(every parameter perturbed, so no LayerNorm is the identity) saved with
`save_pretrained` give the same logits here; ours saved with `save_pretrained` load in
`transformers.AutoModel` / `AutoModelForCausalLM` with the same outputs; the byte-level
BPE (keras-hub's, in TensorFlow ops) equals `transformers`' `GPT2Tokenizer` token for
token on a vocabulary trained in the test."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch

from keras_attn.data import gpt2_tokenizer
from keras_attn.errors import UserInputError
from keras_attn.models import GPTLanguageModel

VOCABULARY_SIZE = 300

TEXTS = [
    "In the beginning God created the heaven and the earth.",
    "And God said, Let there be light: and there was light.",
    "It's 3.14159 o'clock; they'll say: \"we've 12 apples\" (and 7,000 pears)!",
    "  leading spaces,   inner   runs and trailing spaces   ",
    "tabs\tand\nnew\n\nlines\r\nend",
    "Unicode: café, naïve, Straße, 東京, Ελληνικά, emoji 🙂👍🏽 and ∑ symbols",
    "CamelCaseWords, snake_case_words, kebab-case-words, URLs http://x.org/a?b=1",
    "<|endoftext|>after the end token<|endoftext|>",
    "",
    "a",
    "numbers 1234567890 and 0.5e-3 and ...... dots",
]


def _perturbed(model, seed=0):
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model.eval()


def _config(**overrides):
    import transformers

    sizes = dict(vocab_size=97, n_positions=24, n_embd=32, n_layer=2, n_head=4)
    return transformers.GPT2Config(**{**sizes, **overrides})


def _ids(seed=0, shape=(3, 11)):
    return np.random.default_rng(seed).integers(0, 97, shape).astype("int32")


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {
            "n_inner": 48,
            "activation_function": "gelu",
            "layer_norm_epsilon": 1e-6,
            "eos_token_id": 5,
        },
    ],
    ids=["gpt2", "inner-gelu-eps"],
)
def test_transformers_gpt2_logits_are_ours(tmp_path, overrides):
    import transformers

    reference = _perturbed(transformers.GPT2LMHeadModel(_config(**overrides)))
    reference.save_pretrained(tmp_path)
    model = GPTLanguageModel.from_pretrained(tmp_path)
    assert (model.num_layers, model.hidden_dim, model.scale_embeddings) == (2, 32, False)
    # Padding is the end token, unless (GPT-2's 50256) it is outside the vocabulary.
    assert model.pad_token_id == overrides.get("eos_token_id", 0)
    token_ids = _ids()
    with torch.no_grad():
        expected = reference(torch.tensor(token_ids, dtype=torch.long)).logits.numpy()
    np.testing.assert_allclose(np.asarray(model(token_ids)), expected, atol=1e-5, rtol=0)
    # Every layer's hidden states, as `output_hidden_states` gives them (ln_f on the last).
    with torch.no_grad():
        states = reference(torch.tensor(token_ids), output_hidden_states=True).hidden_states
    ours = model.hidden_states(token_ids)
    assert len(ours) == len(states) == 3
    for mine, theirs in zip(ours, states, strict=True):
        np.testing.assert_allclose(np.asarray(mine), theirs.numpy(), atol=1e-5, rtol=0)


def test_gpt2_model_layout_loads_and_cached_decoding_agrees(tmp_path):
    import transformers

    reference = _perturbed(transformers.GPT2LMHeadModel(_config()), seed=1)
    reference.transformer.save_pretrained(tmp_path)  # GPT2Model: no "transformer." prefix
    model = GPTLanguageModel.from_pretrained(tmp_path)
    prompt = _ids(2, (2, 4))
    with torch.no_grad():
        expected = reference.generate(
            torch.tensor(prompt, dtype=torch.long),
            max_length=12,
            do_sample=False,
            pad_token_id=0,
        ).numpy()
    ours = model.generate(prompt, max_length=12, strategy="greedy", jit_compile=False)
    np.testing.assert_array_equal(ours, expected)


def test_save_pretrained_loads_in_transformers_with_the_same_outputs(tmp_path):
    import transformers

    model = GPTLanguageModel(
        97,
        num_layers=2,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=40,
        max_sequence_length=24,
        scale_embeddings=False,
        activation="gelu",
        dropout=0.0,
    )
    rng = np.random.default_rng(3)
    for variable in model.weights:  # no LayerNorm at the identity, no zero bias
        variable.assign(np.asarray(variable) + rng.normal(0, 0.1, variable.shape))
    folder = model.save_pretrained(tmp_path / "out")
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "gpt2" and config["n_inner"] == 40
    token_ids = _ids(4)
    with torch.no_grad():
        x = torch.tensor(token_ids, dtype=torch.long)
        lm = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
        base = transformers.AutoModel.from_pretrained(folder).eval()
        logits = lm(x).logits.numpy()
        hidden = base(x).last_hidden_state.numpy()
    assert type(base).__name__ == "GPT2Model"
    np.testing.assert_allclose(logits, np.asarray(model(token_ids)), atol=1e-5, rtol=0)
    ours_hidden = np.asarray(model._call_decoder(keras.ops.convert_to_tensor(token_ids), None))
    np.testing.assert_allclose(hidden, ours_hidden, atol=1e-5, rtol=0)
    # And back: the same weights, the same config.
    again = GPTLanguageModel.from_pretrained(folder)
    for mine, theirs in zip(model.weights, again.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


def _train_vocabulary(folder):
    """A small byte-level BPE trained here with `tokenizers`, saved as GPT-2's files."""
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    corpus = [text * 3 for text in TEXTS] + ["the quick brown fox jumps over the lazy dog"] * 5
    trainer.train_from_iterator(
        corpus, vocab_size=VOCABULARY_SIZE, min_frequency=1, special_tokens=["<|endoftext|>"]
    )
    folder.mkdir(parents=True, exist_ok=True)
    trainer.save_model(str(folder))
    return folder


def test_byte_pair_tokenizer_equals_transformers_gpt2_tokenizer(tmp_path):
    import transformers

    folder = _train_vocabulary(tmp_path / "vocab")
    reference = transformers.GPT2Tokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    tokenizer = gpt2_tokenizer(folder)
    assert tokenizer.vocabulary_size() == len(reference)

    @tf.function
    def in_the_graph(texts):
        return tokenizer(texts)

    ours = in_the_graph(tf.constant(TEXTS)).to_list()
    for text, row in zip(TEXTS, ours, strict=True):
        assert row == reference.encode(text), text
    # Detokenizing gives the text back, byte for byte, as theirs does.
    back = tokenizer.detokenize(tf.ragged.constant(ours))
    assert [t.decode() if isinstance(t, bytes) else t for t in back] == [
        reference.decode(r) for r in ours
    ]
    # Through tf.data too (the training pipelines' path).
    dataset = tf.data.Dataset.from_tensor_slices(TEXTS).map(tokenizer)
    assert [list(x.numpy()) for x in dataset] == ours


@pytest.mark.slow
def test_tokenizer_round_trips_through_save_pretrained(tmp_path):
    import transformers

    tokenizer = gpt2_tokenizer(_train_vocabulary(tmp_path / "vocab"))
    model = GPTLanguageModel(
        VOCABULARY_SIZE,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
        scale_embeddings=False,
    )
    folder = model.save_pretrained(tmp_path / "out", tokenizer=tokenizer)
    reference = transformers.AutoTokenizer.from_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    end = tokenizer.vocabulary["<|endoftext|>"]
    assert config["eos_token_id"] == config["bos_token_id"] == end == reference.eos_token_id
    again = gpt2_tokenizer(folder)
    for text in TEXTS[:7]:
        assert again([text])[0] == reference.encode(text) == tokenizer([text])[0]


def test_keras_round_trip_keeps_unscaled_embeddings(tmp_path):
    model = GPTLanguageModel(
        50,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
        scale_embeddings=False,
    )
    token_ids = _ids(5, (2, 6)) % 50
    path = tmp_path / "gpt2.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert restored.scale_embeddings is False
    np.testing.assert_allclose(np.asarray(restored(token_ids)), np.asarray(model(token_ids)))
    scaled = GPTLanguageModel.from_config({**model.get_config(), "scale_embeddings": True})
    scaled.set_weights(model.get_weights())
    assert not np.allclose(np.asarray(scaled(token_ids)), np.asarray(model(token_ids)))


def test_bad_checkpoints_and_models_are_named(tmp_path):
    import transformers

    reference = _perturbed(transformers.GPT2LMHeadModel(_config()))
    reference.save_pretrained(tmp_path / "gpt2")
    config = json.loads((tmp_path / "gpt2" / "config.json").read_text())

    with pytest.raises(ValueError, match="model_type 'gpt2'.*model_type='bert'"):
        (tmp_path / "bert").mkdir()
        (tmp_path / "bert" / "config.json").write_text(json.dumps({**config, "model_type": "bert"}))
        (tmp_path / "bert" / "model.safetensors").write_bytes(
            (tmp_path / "gpt2" / "model.safetensors").read_bytes()
        )
        GPTLanguageModel.from_pretrained(tmp_path / "bert")
    (tmp_path / "gpt2" / "config.json").write_text(
        json.dumps({**config, "scale_attn_by_inverse_layer_idx": True})
    )
    with pytest.raises(UserInputError, match="scale_attn_by_inverse_layer_idx"):
        GPTLanguageModel.from_pretrained(tmp_path / "gpt2")
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({**config, "n_layer": 3}))
    with pytest.raises(ValueError, match=r"lacks 16 GPT-2 weight\(s\).*h\.2\.ln_1\.weight"):
        GPTLanguageModel.from_pretrained(tmp_path / "gpt2")
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="scale_embeddings=False"):
        GPTLanguageModel.from_pretrained(tmp_path / "gpt2", scale_embeddings=True)
    with pytest.raises(FileNotFoundError, match="Missing: vocab.json"):
        gpt2_tokenizer(tmp_path / "gpt2")

    scaled = GPTLanguageModel(
        97, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=8
    )
    with pytest.raises(ValueError, match="'scale_embeddings': True"):
        scaled.save_pretrained(tmp_path / "out")
    post_ln = GPTLanguageModel.from_config(
        {**scaled.get_config(), "norm_first": False, "scale_embeddings": False}
    )
    with pytest.raises(ValueError, match="'norm_first': False"):
        post_ln.save_pretrained(tmp_path / "out")
    with pytest.raises(TypeError, match="byte-pair tokenizer"):
        GPTLanguageModel.from_config(
            {**scaled.get_config(), "scale_embeddings": False}
        ).save_pretrained(tmp_path / "out", tokenizer=object())


@pytest.mark.slow
def test_exported_gpt2_tokenizes_and_continues_as_transformers_does(tmp_path):
    import transformers

    from keras_attn.export import export_saved_model, load_saved_model
    from keras_attn.models import GenerationConfig

    folder = _train_vocabulary(tmp_path / "gpt2")
    config = _config(vocab_size=VOCABULARY_SIZE, n_positions=48, eos_token_id=0, bos_token_id=0)
    reference = _perturbed(transformers.GPT2LMHeadModel(config), seed=5)
    reference.save_pretrained(folder)
    path = export_saved_model(
        GPTLanguageModel.from_pretrained(folder),
        gpt2_tokenizer(folder),
        tmp_path / "saved" / "gpt2",
        check=True,  # the op allow-list and the warm-up replay, with keras-hub's BPE ops
        generation=GenerationConfig(max_length=24),
    )
    served = load_saved_model(path).signatures["serving_default"]
    prompt = "In the beginning God"
    ids = served(prompt=tf.constant([prompt]))["token_ids"].numpy()
    tokens = transformers.GPT2Tokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    start = tokens.encode(prompt)
    with torch.no_grad():
        expected = reference.generate(
            torch.tensor([start]), max_length=24, do_sample=False, pad_token_id=0
        ).numpy()
    np.testing.assert_array_equal(ids, expected)
