"""Causal language models on strings (issue 59, the causal-LM kind): `fit` on strings
trains exactly as `fit` on the same texts packed by hand, `predict` on strings equals
the token-id path, the model with its preprocessor survives a `.keras` file, and
`generate` continues strings as the token-id path does; `CausalLM.from_preset` reads a
Hugging Face GPT-2 folder and generates what `transformers` generates."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.models import (
    CausalLM,
    CausalLMPreprocessor,
    GPTLanguageModel,
    MaskedLM,
    TransformerXL,
)
from tests.models.conftest import LENGTH, SIZE, TRACED

# What a few steps compute on strings is this module's subject, the traced steps being
# tests/training's: its tests run eagerly (conftest.py's `eager`), in about half the time.
pytestmark = pytest.mark.eager  # byte-level BPE cases: `TRACED`

STEPS_LENGTH = 12  # x's tokens: the texts are cut to 13 with their start and end


def _language_model(tokenizer):
    keras.utils.set_random_seed(0)
    return GPTLanguageModel(
        tokenizer.vocabulary_size,
        **SIZE,
        max_sequence_length=LENGTH,
        pad_token_id=tokenizer.pad_id,
    )


def _by_hand(tokenizer, texts, length):
    """What a user fed before preprocessors: `[SEP] pieces [SEP]`, cut to `length + 1`,
    right-padded; inputs, next tokens and their weights."""
    rows = [
        ([tokenizer.sep_id] + row + [tokenizer.sep_id])[: length + 1]
        for row in tokenizer.tokenize(tf.constant(texts)).to_list()
    ]
    ids = np.full((len(rows), length + 1), tokenizer.pad_id, "int32")
    weights = np.zeros((len(rows), length + 1), "float32")
    for i, row in enumerate(rows):
        ids[i, : len(row)], weights[i, : len(row)] = row, 1.0
    return ids[:, :-1], ids[:, 1:], weights[:, 1:]


def _weights(model):
    return [np.array(w) for w in model.weights]


@pytest.mark.slow
def test_strings_train_predict_and_generate_as_token_ids(tokenizers, reviews, tmp_path):
    texts = reviews[0]
    tokenizer = tokenizers["bert"]
    preprocessor = CausalLMPreprocessor(tokenizer, sequence_length=STEPS_LENGTH)
    ours, theirs = _language_model(tokenizer), _language_model(tokenizer)
    assert isinstance(ours, CausalLM) and not isinstance(ours, MaskedLM)
    ours.preprocessor = preprocessor
    for model in (ours, theirs):
        # epsilon 1e-3: a key bias's gradient is zero but for rounding, which Adam's
        # default 1e-7 would blow up into steps that differ between the two graphs.
        model.compile(optimizer=keras.optimizers.Adam(1e-2, epsilon=1e-3))
    ours.fit(texts, batch_size=4, shuffle=False, verbose=0)  # 3 steps
    x, y, w = _by_hand(tokenizer, texts, STEPS_LENGTH)
    assert w[:, -1].all()  # reviews longer than the rows: cut, the last token kept
    theirs.fit(x, y, sample_weight=w, batch_size=4, shuffle=False, verbose=0)
    assert int(ours.optimizer.iterations) == int(theirs.optimizer.iterations) == 3
    moved = max(
        np.abs(a - b).max()
        for a, b in zip(_weights(ours), _weights(_language_model(tokenizer)), strict=True)
    )
    assert moved > 1e-3  # the steps trained
    # Within 1e-5, not bit for bit: where Grappler runs (as for a user; conftest.py
    # turns it off in tests) the two graphs' shapes (static here, not there) let it
    # fuse products with their biases differently; a step on other batches moves
    # weights by 1e-3 and more.
    for a, b in zip(_weights(ours), _weights(theirs), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    loss = ours.evaluate(texts, batch_size=4, verbose=0)
    np.testing.assert_allclose(
        loss, theirs.evaluate(x, y, sample_weight=w, batch_size=4, verbose=0), rtol=1e-5
    )
    # Predicting and generating strings after a `.keras` round trip.
    ours.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert type(loaded.preprocessor) is CausalLMPreprocessor
    assert loaded.preprocessor.get_config() == preprocessor.get_config()
    np.testing.assert_allclose(
        loaded.predict(texts, batch_size=5, verbose=0),
        theirs.predict(x, batch_size=5, verbose=0),
        atol=1e-5,
    )
    prompts = ["a fine film", "the plot is"]
    generated = loaded.generate(prompts, max_length=10)
    ids = [[tokenizer.sep_id] + row for row in tokenizer.tokenize(tf.constant(prompts)).to_list()]
    tokens = theirs.generate(ids, max_length=10, end_token_id=tokenizer.sep_id)
    expected = []
    for row, prompt in zip(tokens.tolist(), ids, strict=True):
        continuation = row[len(prompt) :]
        if tokenizer.sep_id in continuation:
            continuation = continuation[: continuation.index(tokenizer.sep_id)]
        expected.append(tokenizer.detokenize([prompt + continuation])[0])
    assert generated == expected
    assert generated[0].startswith("a fine film")
    assert loaded.generate("a fine film", max_length=10) == generated[0]  # one string, one back
    # Exported, the model serves what `generate` gives (its default length: the rows').
    path = loaded.export(tmp_path / "lm" / "1", warmup=False)
    served = tf.saved_model.load(str(path)).signatures["serving_default"]
    texts = [t.decode() for t in served(prompt=tf.constant(prompts))["text"].numpy().tolist()]
    assert texts == loaded.generate(prompts)
    with pytest.raises(ValueError, match="no CausalLMPreprocessor to read text"):
        theirs.generate("a fine film")


@pytest.mark.slow  # 10 s: `make test`; GPT's case is in test-fast
def test_transformer_xl_trains_on_and_continues_strings_too(tokenizers, reviews, tmp_path):
    tokenizer = tokenizers["bert"]
    keras.utils.set_random_seed(0)
    model = TransformerXL(
        tokenizer.vocabulary_size, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, segment_length=8, memory_length=8, pad_token_id=tokenizer.pad_id,
    )  # fmt: skip
    model.preprocessor = CausalLMPreprocessor(tokenizer, sequence_length=16)
    assert isinstance(model, CausalLM)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = model.fit(reviews[0], batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    model.save(tmp_path / "xl.keras")
    loaded = keras.saving.load_model(tmp_path / "xl.keras")
    assert type(loaded.preprocessor) is CausalLMPreprocessor
    ids = [[tokenizer.sep_id] + tokenizer.tokenize(tf.constant(["a fine film"])).to_list()[0]]
    tokens = loaded.generate(ids, max_length=12, end_token_id=tokenizer.sep_id)[0].tolist()
    continuation = tokens[len(ids[0]) :]
    if tokenizer.sep_id in continuation:
        continuation = continuation[: continuation.index(tokenizer.sep_id)]
    expected = tokenizer.detokenize([ids[0] + continuation])[0]
    assert loaded.generate("a fine film", max_length=12) == expected


def test_causal_lm_preprocessor_packs_cuts_and_refuses(tokenizers, tiny_preset):
    tokenizer = tokenizers["bert"]
    preprocessor = CausalLMPreprocessor(tokenizer, sequence_length=6, add_end_token=False)
    x, y, w = preprocessor("a fine film")
    assert x.shape == y.shape == w.shape == (6,)
    assert int(x[0]) == tokenizer.sep_id and tokenizer.sep_id not in y.numpy()[1:].tolist()
    assert CausalLMPreprocessor.from_config(preprocessor.get_config()).sequence_length == 6
    mapped = tf.data.Dataset.from_tensor_slices(["a", "b c"]).batch(2).map(preprocessor)
    x, y, w = next(iter(mapped))
    assert w.numpy().tolist()[0] == [1, 0, 0, 0, 0, 0]  # "a": start, a (no end token)
    with pytest.raises(ValueError, match="targets are its next tokens"):
        preprocessor(["a"], [1])
    with pytest.raises(ValueError, match="`sequence_length` an int >= 1"):
        CausalLMPreprocessor(tokenizer, sequence_length=0)
    with pytest.raises(TypeError, match="string or a batch of strings"):
        preprocessor([1, 2])
    with pytest.raises(ValueError, match="holds a BertBackbone, not a causal language model"):
        CausalLM.from_preset(tiny_preset)
    with pytest.raises(TypeError, match="built from a preset"):
        CausalLM()


@pytest.mark.slow
@TRACED
def test_a_gpt2_folder_generates_what_transformers_generates(reviews, tmp_path):
    """keras-hub's `CausalLM.from_preset("gpt2_base_en")` with our names: a random
    Hugging Face GPT-2 and its byte-level BPE; greedy continuations of strings equal
    `transformers`' own `generate` from the same ids, and `fit` on strings runs."""
    import torch
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(reviews[2], vocab_size=400, special_tokens=["<|endoftext|>"])
    trainer.save_model(str(tmp_path))
    end = json.loads((tmp_path / "vocab.json").read_text())["<|endoftext|>"]
    config = transformers.GPT2Config(
        vocab_size=400, n_positions=32, n_embd=16, n_layer=2, n_head=2, bos_token_id=end,
        eos_token_id=end,
    )  # fmt: skip
    torch_model = transformers.GPT2LMHeadModel(config).eval()
    for parameter in torch_model.parameters():  # answers that vary from token to token
        parameter.data.normal_(0, 0.3, generator=torch.Generator().manual_seed(0))
    torch_model.save_pretrained(tmp_path)
    model = CausalLM.from_preset(tmp_path)
    assert type(model) is GPTLanguageModel and model.preprocessor.sequence_length == 32
    assert np.isclose(float(model.optimizer.learning_rate), 2e-5)  # keras-hub's
    prompts = ["A fine film", "The plot"]
    generated = model.generate(prompts, max_length=12)
    reference = transformers.AutoTokenizer.from_pretrained(tmp_path)
    for prompt, text in zip(prompts, generated, strict=True):
        ids = [end] + reference(prompt)["input_ids"]
        theirs = torch_model.generate(
            torch.tensor([ids]), max_length=12, do_sample=False,
            pad_token_id=end, eos_token_id=end,
        )[0].tolist()  # fmt: skip
        assert text == reference.decode(theirs, skip_special_tokens=True), (prompt, text)
        assert text.startswith(prompt)
    history = model.fit(reviews[0][:4], batch_size=2, verbose=0)
    assert np.isfinite(history.history["loss"][0])
