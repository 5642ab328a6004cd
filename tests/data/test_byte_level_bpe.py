"""GPT-2's, Llama 3's and Qwen 2's pre-tokenization in TensorFlow ops against the `regex`
module running their own patterns (look-ahead included), and the whole tokenizer against
`tokenizers`."""

import numpy as np
import pytest
import regex

from keras_attn.data.byte_level_bpe import pretokenize, tokenizer_class

GPT2_PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
# Llama 3's and Qwen 2's (`transformers`' `Qwen2Tokenizer`, llama.cpp's `qwen2` pre).
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPLIT_PATTERNS = {
    "llama3": regex.compile(LLAMA3_PATTERN),
    "qwen2": regex.compile(LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")),
}
# The characters random texts are drawn from: every kind of white space GPT-2's `\s`
# knows, letters, digits, punctuation, the apostrophe of contractions, CJK, emoji, and
# the marker keras-hub's emulation relies on.
ALPHABET = list("ab zé\t\n\r'sltmdv7१2.,!(\u00a0\u3000你😀६") + [" ", " ", "  "]
SPECIAL = ["<|im_start|>", "<|im_end|>"]


def _texts(count, seed=0, specials=()):
    rng = np.random.default_rng(seed)
    alphabet = ALPHABET + list(specials)
    return ["".join(rng.choice(alphabet, rng.integers(0, 24))) for _ in range(count)]


def _reference(text, specials=(), individual_digits=False):
    pieces = []
    parts = regex.split(f"({'|'.join(map(regex.escape, specials))})", text) if specials else [text]
    for part in parts:
        if part in specials:
            pieces.append(part)
            continue
        chunks = regex.split(r"(\p{N})", part) if individual_digits else [part]
        for chunk in chunks:
            pieces += GPT2_PATTERN.findall(chunk)
    return [piece for piece in pieces if piece]


def _ours(texts, specials=(), individual_digits=False):
    rows = pretokenize(texts, specials, individual_digits).to_list()
    return [[piece.decode("utf-8") for piece in row] for row in rows]


@pytest.mark.parametrize("individual_digits", [False, True])
def test_pretokenize_is_gpt2s_regular_expression(individual_digits):
    texts = _texts(400, seed=int(individual_digits)) + [
        "a   b\t\tc\n\n\nd    ",
        "def f(x):\n    return  x",
        "  leading and trailing  ",
        "x  's  'll",
        "",
        " ",
        "12 345 6",
    ]
    expected = [_reference(text, (), individual_digits) for text in texts]
    assert _ours(texts, (), individual_digits) == expected


# What each part of Llama 3's pattern is for: a mark or tab before a word, new lines after
# a mark, runs of white space around new lines, numbers, contractions in upper case.
SPLIT_PROBES = [
    "(hello ((x a.b \tword  (x", "Hi!\n\nThere!\n \nx", "x \n  y\n\n", "IT'S DON'T We'Ll 'sup",
    "1234567 ٣٤٥ ⅷ x1y22", "  \t  x\u00a0\u00a0y \u3000z  ", "\r\n\r\n  .\n", "你好，世界。日本語",
    "🤗🎉 emoji 👩\u200d👩\u200d👧", "Héllo wörld, café naïve", "", " ", "\n", "a  ",
]  # fmt: skip


@pytest.mark.parametrize("split", ["llama3", "qwen2"])
def test_pretokenize_is_llama3s_and_qwen2s_regular_expression(split):
    alphabet = ALPHABET + list("SLTD\x0b٣ⅷ-") + ["\n\n", " (", "'S"]
    rng = np.random.default_rng(7)
    texts = ["".join(rng.choice(alphabet, rng.integers(0, 24))) for _ in range(600)]
    texts += SPLIT_PROBES
    expected = [SPLIT_PATTERNS[split].findall(text) for text in texts]
    rows = pretokenize(texts, split=split).to_list()
    ours = [[piece.decode("utf-8") for piece in row] for row in rows]
    assert ours == expected
    # Around special tokens, each part on its own.
    texts = _texts(100, seed=3, specials=SPECIAL) + ["<|im_start|>user\n (Hi<|im_end|>\n  "]
    expected = [
        [piece for part in regex.split(f"({'|'.join(map(regex.escape, SPECIAL))})", text)
         for piece in ([part] if part in SPECIAL else SPLIT_PATTERNS[split].findall(part))]
        for text in texts
    ]  # fmt: skip
    rows = pretokenize(texts, SPECIAL, split=split).to_list()
    assert [[piece.decode("utf-8") for piece in row] for row in rows] == expected


def test_pretokenize_refuses_an_unknown_split_and_digits_with_llama3():
    with pytest.raises(ValueError, match="`split` to be one of"):
        pretokenize(["a"], split="gpt4")
    with pytest.raises(ValueError, match="`individual_digits` is GPT-2's"):
        pretokenize(["a"], individual_digits=True, split="qwen2")


def test_pretokenize_keeps_special_tokens_whole_and_splits_around_them():
    texts = _texts(200, seed=2, specials=SPECIAL) + ["<|im_start|>user\nHi<|im_end|>\n  "]
    expected = [_reference(text, SPECIAL, True) for text in texts]
    assert _ours(texts, SPECIAL, True) == expected


def test_tokenizer_gives_the_ids_of_tokenizers_byte_level_bpe():
    """A byte-level BPE trained by `tokenizers` (digits apart, as SmolLM2's) on text with
    every kind of white-space run: the same ids from ours, special tokens included."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    reference = Tokenizer(models.BPE())
    reference.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    reference.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = _texts(600, seed=3) + ["the  theme\n\n\n  then  there   1234"] * 20
    reference.train_from_iterator(corpus, trainer)
    state = reference.to_str()
    import json

    model = json.loads(state)["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    ours = tokenizer_class()(
        vocabulary=model["vocab"], merges=merges, special_tokens=SPECIAL, individual_digits=True
    )
    probes = _texts(150, seed=4, specials=SPECIAL) + [
        "<|im_start|>user\nthe  theme\n\n\nthen<|im_end|>\n",
        "there   1234  ",
    ]
    rows = ours(probes)  # one call: keras-hub traces its merges once per call
    for text, row in zip(probes, rows, strict=True):
        assert [int(i) for i in row] == reference.encode(text).ids, repr(text)
    assert ours.detokenize(ours(probes[-1])) == probes[-1]
    # As a layer it saves and loads (its own options included).
    clone = tokenizer_class().from_config(ours.get_config())
    assert clone.individual_digits and clone.unsplittable_tokens == SPECIAL


def test_eager_batches_run_one_trace_per_sequence_length_and_free_with_the_tokenizer():
    """Eager batches of strings of any size go through one `tf.function` per
    `sequence_length` (keras-hub's merge loop otherwise ran op by op, retraced for each
    new shape); the ids are the untraced path's, scalars and graphs take that path, and
    the tokenizer is freed with its last reference."""
    import gc

    from keras_attn.data import byte_level_bpe

    freed = _tokenize_eagerly_padded_and_in_a_graph()
    gc.collect()
    assert freed() is None and not byte_level_bpe._COMPILED


def _tokenize_eagerly_padded_and_in_a_graph():
    """The checks of the test above on a tokenizer of their own (a frame TensorFlow's
    tracing read the locals of would keep it); a weak reference to it."""
    import weakref

    import tensorflow as tf

    from keras_attn.data import byte_level_bpe
    from tests.models.llama.gguf_files import byte_level_bpe_metadata

    metadata, _ = byte_level_bpe_metadata()
    tokenizer = tokenizer_class()(
        vocabulary={token: i for i, token in enumerate(metadata["token_list"])},
        merges=metadata["token_merges"],
    )
    texts = _texts(9, seed=5) + ["the  theme\n\n\n  then"]
    for count in (1, 4, 10):
        assert tokenizer(texts[:count]) == tokenizer._traced_tokenize(texts[:count])
    assert tokenizer._compiled_tokenize().experimental_get_tracing_count() == 1
    tokenizer.sequence_length = 6
    padded = tokenizer(texts)
    assert padded.shape == (10, 6)
    np.testing.assert_array_equal(padded, tokenizer._traced_tokenize(texts))
    assert sorted(byte_level_bpe._COMPILED[tokenizer], key=str) == [6, None]
    scalar = tokenizer(texts[-1])  # untraced: a scalar keeps keras-hub's own path
    np.testing.assert_array_equal(scalar, padded[-1])
    graph = tf.function(tokenizer.__call__, input_signature=[tf.TensorSpec([None], tf.string)])
    np.testing.assert_array_equal(graph(tf.constant(texts)), padded)
    assert tokenizer._compiled_tokenize().experimental_get_tracing_count() == 1
    return weakref.ref(tokenizer)
