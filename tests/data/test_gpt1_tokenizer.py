"""`GPT1Tokenizer` packs raw text in the graph exactly as `gpt1_inputs` packs its ids:
`[START] A [EXTRACT]`, `[START] A [DELIM] B [EXTRACT]`, trimmed round-robin."""

import itertools

import pytest

from keras_attn.data import GPT1Tokenizer
from keras_attn.models import gpt1_inputs

BASE = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(20)]


@pytest.mark.slow  # 5 s on the 2 busy cores: out of `make test-fast`
def test_packing_equals_gpt1_inputs_at_every_length_and_trim():
    vocabulary = GPT1Tokenizer.with_gpt1_tokens(BASE)
    assert vocabulary[-3:] == ["[START]", "[DELIM]", "[EXTRACT]"]
    assert GPT1Tokenizer.with_gpt1_tokens(vocabulary) == vocabulary  # added once
    for length in (6, 9, 13):
        tokenizer = GPT1Tokenizer(vocabulary, sequence_length=length)
        for a, b in itertools.product(range(1, 9), repeat=2):
            first = " ".join(f"w{i}" for i in range(a))
            second = " ".join(f"w{10 + i}" for i in range(b))
            ids = tokenizer.tokenize([first, second]).to_list()
            special = tokenizer.gpt1_token_ids
            pair = tokenizer([first], [second])
            expected = gpt1_inputs("entailment", [ids], *special, sequence_length=length)
            assert pair["token_ids"].numpy().tolist() == expected.tolist(), (length, a, b)
            real = (expected != tokenizer.pad_id).astype("int32")
            assert pair["padding_mask"].numpy().tolist() == real.tolist()
            single = tokenizer([first])["token_ids"].numpy().tolist()
            expected = gpt1_inputs("classification", [ids[0]], *special, sequence_length=length)
            assert single == expected.tolist()


def test_the_special_tokens_are_required_and_never_detokenized():
    with pytest.raises(ValueError, match=r"\[START\].*Missing: \['\[START\]', '\[DELIM\]'"):
        GPT1Tokenizer(BASE)
    tokenizer = GPT1Tokenizer(GPT1Tokenizer.with_gpt1_tokens(BASE), sequence_length=8)
    packed = tokenizer(["w1 w2"], ["w3"])["token_ids"]
    assert tokenizer.detokenize(packed) == ["w1 w2 w3"]
