"""keras-hub presets in and out, GPT-2 (issue 59): a random keras-hub `GPT2CausalLM`
saved with `save_to_preset` loads as our `CausalLM` with equal logits and the same
greedy continuations of strings, and ours written with `save_to_preset` loads into
keras-hub's `CausalLM.from_preset` the same way; what GPT-2 cannot hold is refused."""

import json

import keras_hub
import numpy as np
import pytest

from keras_attn.data import gpt2_tokenizer
from keras_attn.models import CausalLM, CausalLMPreprocessor, GPTLanguageModel, save_to_preset

PROMPTS = ["A fine film", "Señor 😀 the plot", "東京"]
SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=24)


@pytest.fixture(scope="module")
def bpe_folder(reviews, tmp_path_factory):
    """GPT-2's files for a byte-level BPE learned from the reviews, `<|endoftext|>` its
    last id as in GPT-2's (keras-hub pads GPT-2 with id 0: an end token there would stop
    its generation at once)."""
    from tokenizers import ByteLevelBPETokenizer

    folder = tmp_path_factory.mktemp("gpt2_bpe")
    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(reviews[2], vocab_size=399)
    trainer.save_model(str(folder))
    vocabulary = json.loads((folder / "vocab.json").read_text())
    vocabulary["<|endoftext|>"] = len(vocabulary)
    (folder / "vocab.json").write_text(json.dumps(vocabulary))
    return folder


def _varied(model):
    """Weights drawn wide enough that greedy continuations differ from token to token."""
    for weight in model.weights:
        rng = np.random.default_rng(len(weight.path))
        weight.assign(rng.normal(0, 0.3, weight.shape).astype("float32"))
    return model


def _greedy(hub):
    hub.compile(sampler="greedy")
    return hub


def _same_continuations(ours, hub, length=16):
    """Greedy continuations of `PROMPTS`: keras-hub's ids (from its own preprocessing)
    read by our preprocessor are our text from strings; and keras-hub's text, but for
    a cut UTF-8 character (keras-hub's Python path writes U+FFFD, its TensorFlow ops,
    which ours and our exports run, leave the bytes out)."""
    x = hub.preprocessor.generate_preprocess(PROMPTS, sequence_length=length)
    preprocessor, hub.preprocessor = hub.preprocessor, None
    end = preprocessor.tokenizer.end_token_id
    theirs = hub.generate(x, max_length=length, stop_token_ids=(end,))
    hub.preprocessor = preprocessor
    prompts = ours.preprocessor.generate_preprocess(PROMPTS)
    rows = np.full((len(PROMPTS), length), end)
    for row in range(len(PROMPTS)):
        ids = np.asarray(theirs["token_ids"][row])[np.asarray(theirs["padding_mask"][row])]
        assert ids[: len(prompts[row])].tolist() == prompts[row]
        rows[row, : len(ids)] = ids
    texts = ours.generate(PROMPTS, max_length=length)
    assert texts == ours.preprocessor.generate_postprocess(rows, [len(p) for p in prompts])
    for prompt, text in zip(PROMPTS, texts, strict=True):
        assert text.startswith(prompt)
        assert text == hub.generate(prompt, max_length=length).replace("\ufffd", "")


@pytest.mark.slow  # 4 s on the 2 busy cores: out of `make test-fast`
def test_a_keras_hub_gpt2_causal_lm_preset_loads_into_ours(bpe_folder, tmp_path):
    vocabulary = json.loads((bpe_folder / "vocab.json").read_text())
    merges = (bpe_folder / "merges.txt").read_text().splitlines()[1:]
    tokenizer = keras_hub.models.GPT2Tokenizer(vocabulary=vocabulary, merges=merges)
    preprocessor = keras_hub.models.GPT2CausalLMPreprocessor(tokenizer, sequence_length=16)
    backbone = _varied(keras_hub.models.GPT2Backbone(vocabulary_size=len(vocabulary), **SIZE))
    hub = _greedy(keras_hub.models.GPT2CausalLM(backbone, preprocessor=preprocessor))
    hub.save_to_preset(str(tmp_path / "hub"))

    ours = CausalLM.from_preset(tmp_path / "hub")
    assert type(ours) is GPTLanguageModel and ours.preprocessor.sequence_length == 16
    assert ours.pad_token_id == vocabulary["<|endoftext|>"]
    x = preprocessor.generate_preprocess(PROMPTS)
    mask = np.asarray(x["padding_mask"])[..., None] > 0
    np.testing.assert_allclose(
        np.asarray(ours.predict(np.asarray(x["token_ids"]), verbose=0)) * mask,
        np.asarray(hub(x)) * mask,  # the model itself: its predict would preprocess
        atol=1e-5,
    )
    _same_continuations(ours, hub)


@pytest.mark.slow
def test_ours_saved_as_a_keras_hub_gpt2_preset_loads_into_keras_hub(bpe_folder, tmp_path):
    from keras_attn.layers import gelu_approximate

    tokenizer = gpt2_tokenizer(bpe_folder)
    model = _varied(
        GPTLanguageModel(
            tokenizer.vocabulary_size(), **SIZE, activation=gelu_approximate,
            scale_embeddings=False, pad_token_id=tokenizer.end_token_id,
        )
    )  # fmt: skip
    model.preprocessor = CausalLMPreprocessor(tokenizer, sequence_length=16)
    folder = model.save_to_preset(tmp_path / "ours")
    hub = _greedy(keras_hub.models.CausalLM.from_preset(str(folder)))
    assert type(hub).__name__ == "GPT2CausalLM" and hub.preprocessor.sequence_length == 16
    _same_continuations(model, hub)
    again = CausalLM.from_preset(folder)  # and back
    assert again.generate(PROMPTS, max_length=16) == model.generate(PROMPTS, max_length=16)


def test_what_gpt2_cannot_hold_is_refused(bpe_folder, tmp_path):
    exact = GPTLanguageModel(400, **SIZE)  # exact GELU, scaled embeddings: not GPT-2
    with pytest.raises(ValueError, match="GPT2Backbone computes activation='gelu_approximate'"):
        save_to_preset(exact, tmp_path / "a")
    assert not (tmp_path / "a").exists()
