"""Stop strings: `generate` on text and `chat` end where `transformers`' `stop_strings` end
the same greedy continuation of the same GGUF file, cut right after the string; the search
finds the first stopping token as a token-by-token scan does; bad strings are refused."""

import numpy as np
import pytest

from keras_attn.models import GenerationConfig, stop_string_end
from keras_attn.models.stop_strings import stop_at_strings, stop_rows, without_extra


def test_stop_string_end_takes_the_string_that_ends_first():
    assert stop_string_end("abcde", ["cde", "bc"]) == 3  # "bc" ends first, though later listed
    assert stop_string_end("abcde", ["b", "abc"]) == 2
    assert stop_string_end("abcde", ["x"]) is None
    assert stop_string_end("aXbX", ["X"]) == 2  # its first occurrence


@pytest.mark.parametrize("seed", range(20))
def test_bisection_finds_the_token_a_scan_finds(seed):
    """Pieces of 1-3 characters over a 3-letter alphabet, stop strings of 1-4 characters:
    the kept count and the text equal a scan's that stops at the first token whose text
    holds a string."""
    rng = np.random.default_rng(seed)
    pieces = ["".join(rng.choice(list("abc"), rng.integers(1, 4))) for _ in range(12)]
    ids = rng.integers(0, len(pieces), rng.integers(1, 30)).tolist()
    stops = ["".join(rng.choice(list("abc"), rng.integers(1, 5))) for _ in range(2)]

    def detokenize(row):
        return "".join(pieces[i] for i in row)

    count, text = stop_at_strings(detokenize, ids, stops)
    scanned = next(
        (k for k in range(1, len(ids) + 1) if stop_string_end(detokenize(ids[:k]), stops)), None
    )
    if scanned is None:
        assert (count, text) == (len(ids), None)
    else:
        whole = detokenize(ids[:scanned])
        assert count == scanned
        assert text == whole[: stop_string_end(whole, stops)]
        assert any(text.endswith(s) for s in stops)


def test_rows_keep_their_prompts_and_pad_after_the_stopping_token():
    pieces = {1: "x", 2: "ab", 3: "cd", 4: "e", 9: "<end>"}

    def detokenize(row):
        return "".join(pieces[i] for i in row)

    tokens = np.array([[1, 3, 2, 3, 4, 4], [3, 3, 1, 2, 9, 4]])
    # Row 0: prompt "xcd" (a "c" there does not stop it), "ab" "cd": "bc" ends in "cd".
    # Row 1: prompt "cd", then "cd" "x" "ab" and the end token: no "bc" before it.
    cut, extras = stop_rows(tokens, [2, 1], ["bc"], detokenize, end_token_id=9, pad_token_id=0)
    assert cut.tolist() == [[1, 3, 2, 3, 0, 0], [3, 3, 1, 2, 9, 4]]
    assert extras == ["d", ""]
    assert tokens[0, 4] == 4  # the caller's array is left as it was
    assert without_extra("xcdabcd", "d") == "xcdabc"
    assert without_extra("xcdabcd", "") == "xcdabcd"


@pytest.mark.parametrize(
    "value, error, words",
    [
        (["a"] * 17, ValueError, "1 to 16"),
        ([], ValueError, "1 to 16"),
        (["x" * 257], ValueError, "1 to 256 characters"),
        ([""], ValueError, "1 to 256 characters"),
        (["\ufffd"], ValueError, "U+FFFD"),
        ([b"stop"], TypeError, "list of strings"),
        (7, TypeError, "list of strings"),
    ],
)
def test_bad_stop_strings_are_refused_by_name(value, error, words):
    with pytest.raises(error, match="stop_strings") as raised:
        GenerationConfig(stop_strings=value)
    assert words in str(raised.value)


def test_one_string_is_a_list_of_one():
    assert GenerationConfig(stop_strings="\n").stop_strings == ("\n",)
    assert GenerationConfig(stop_strings=["a", "b"]).stop_strings == ("a", "b")
    key = GenerationConfig().trace_key()
    assert GenerationConfig(stop_strings="x").trace_key() == key  # the same compiled loop


@pytest.fixture(scope="module")
def gguf_pair(tmp_path_factory):
    """A random Llama GGUF file with a byte-level BPE: ours and `transformers`' readings."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    import torch

    from keras_attn.models import from_gguf
    from tests.models.llama.gguf_files import write_text_llama_gguf

    folder = tmp_path_factory.mktemp("stop_strings")
    write_text_llama_gguf(folder / "model.gguf")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        folder, gguf_file="model.gguf", dtype=torch.float32
    ).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file="model.gguf")
    return from_gguf(folder / "model.gguf"), theirs, tokenizer


def _their_continuation(theirs, reader, ids, new_tokens, **options):
    import torch

    with torch.no_grad():
        row = theirs.generate(
            torch.tensor([ids]), max_new_tokens=new_tokens, do_sample=False, **options
        )[0, len(ids) :].tolist()
    return reader.decode(row, skip_special_tokens=True)


@pytest.mark.slow  # 8 s: transformers' reading of the file and a few decodings each
def test_generate_and_chat_stop_where_transformers_stops(gguf_pair):
    ours, theirs, tokenizer = gguf_pair
    prompt = "the them"
    ids = ours.preprocessor.generate_preprocess([prompt])[0]
    length = len(ids) + 16
    whole = ours.generate(prompt, max_length=length, strategy="greedy", jit_compile=False)
    continuation = whole[len(prompt) :]
    assert continuation == _their_continuation(theirs, tokenizer, ids, 16)
    # Strings from the continuation itself: a piece inside it, one that a token runs past,
    # two at once, and one it never holds (then nothing changes).
    assert "\ufffd" not in continuation
    stops = [continuation[2:4], continuation[5:6], continuation[-3:-1]]
    stops.append([continuation[6:8], continuation[3:4]])
    # And one that ends inside a token of two characters or more.
    generated = ours.generate([ids], max_length=length, strategy="greedy", jit_compile=False)[
        0, len(ids) :
    ].tolist()
    texts = [tokenizer.decode(generated[:k]) for k in range(len(generated) + 1)]
    k = next(
        k
        for k in range(1, len(generated))
        if len(texts[k + 1]) - len(texts[k]) > 1
        and "\ufffd" not in texts[k + 1][len(texts[k]) - 1 :]
    )
    stops.append(texts[k + 1][len(texts[k]) - 1 : len(texts[k]) + 1])
    assert all(stops)
    cut_inside = False
    for stop in stops:
        options = {"stop_strings": stop, "tokenizer": tokenizer}
        theirs_text = _their_continuation(theirs, tokenizer, ids, 16, **options)
        text, log_prob = ours.generate(
            prompt, max_length=length, stop_strings=stop, return_log_probs=True, jit_compile=False
        )
        assert text.startswith(prompt)
        ours_text = text[len(prompt) :]
        strings = [stop] if isinstance(stop, str) else stop
        assert ours_text == theirs_text[: stop_string_end(theirs_text, strings)], stop
        assert ours_text.endswith(tuple(strings)) and len(ours_text) < len(continuation)
        cut_inside |= ours_text != theirs_text  # the stopping token ran past the string
        assert np.isfinite(log_prob).all()
    assert cut_inside
    # The log-probability counts the kept tokens only: a shorter reply is more likely.
    short = ours.generate(
        prompt, max_length=length, stop_strings=stops[0], return_log_probs=True, jit_compile=False
    )
    assert (
        short[1][0]
        > ours.generate(prompt, max_length=length, return_log_probs=True, jit_compile=False)[1][0]
    )
    assert (
        ours.generate(prompt, max_length=length, stop_strings="never here", jit_compile=False)
        == whole
    )

    messages = [{"role": "user", "content": "the theme"}]
    reply = ours.chat(messages, max_new_tokens=16, jit_compile=False)
    stop = reply[3:5]
    assert (
        ours.chat(messages, max_new_tokens=16, stop_strings=stop, jit_compile=False)
        == reply[: stop_string_end(reply, [stop])]
    )


def test_stop_strings_need_text():
    from keras_attn.models import GPTLanguageModel
    from tests.models.conftest import LENGTH, SIZE

    ours = GPTLanguageModel(16, **SIZE, max_sequence_length=LENGTH)
    with pytest.raises(ValueError, match="text prompt with `stop_strings`"):
        ours.generate([[1, 2, 3]], max_length=8, stop_strings="a", jit_compile=False)


@pytest.mark.slow  # the fixture: transformers' reading of the file
def test_a_reply_cut_inside_a_character_reads_as_transformers_reads_it(gguf_pair):
    """Bytes that are no UTF-8 (a character's first byte alone) are U+FFFD in `generate`'s
    text and the tokenizer's, as in `transformers`' decode (keras-hub's drops them)."""
    ours, _, reader = gguf_pair
    tokenizer = ours.preprocessor.tokenizer
    cafe = reader("café", add_special_tokens=False).input_ids
    for row in ([cafe[-1]], cafe[:-1], cafe[:-1] + cafe[:1], cafe):
        theirs = reader.decode(row)
        assert tokenizer.detokenize([row])[0] == theirs
        assert ours.preprocessor.generate_postprocess([row], [0])[0] == theirs
    assert reader.decode(cafe[-1:]) != reader.decode(cafe[-1:]).replace("\ufffd", "")


@pytest.mark.slow  # an export (no warm-up) and its graph's first call: about 10 s
def test_the_served_generation_stops_where_generate_stops(gguf_pair, tmp_path):
    """Stop strings traced into the SavedModel: the served texts and ids equal Python's
    `generate` on the same prompts, a string inside a token and one never found included."""
    import tensorflow as tf

    from keras_attn.export import export_saved_model

    ours = gguf_pair[0]
    tokenizer = ours.preprocessor.tokenizer
    prompts = ["the them", "the theme then", "then 12"]
    ids = ours.preprocessor.generate_preprocess(prompts)
    length = max(len(row) for row in ids) + 12
    plain = ours.generate(prompts, max_length=length, jit_compile=False)
    continuations = [text[len(prompt) :] for text, prompt in zip(plain, prompts, strict=True)]
    stops = [continuations[0][3:5], continuations[1][1:2] + "never", "never at all"]
    config = GenerationConfig(max_length=length, stop_strings=stops)
    folder = export_saved_model(
        ours, tokenizer, tmp_path / "served", generation=config, warmup=False
    )
    served = tf.saved_model.load(str(folder)).signatures["serving_default"](
        prompt=tf.constant(prompts)
    )
    expected = ours.generate(prompts, max_length=length, stop_strings=stops, jit_compile=False)
    assert expected[0] != plain[0]  # stopped
    assert [t.decode("utf-8") for t in served["text"].numpy()] == expected
    tokens = np.asarray(ours.generate([list(r) for r in ids], max_length=length, jit_compile=False))
    kept, _ = stop_rows(
        tokens,
        [len(r) for r in ids],
        stops,
        lambda g: ours.preprocessor.generate_postprocess([g], [0])[0],
        ours.preprocessor.special_ids()[1],
        ours.pad_token_id,
    )
    pad = ours.pad_token_id
    for row, want in zip(served["token_ids"].numpy(), kept, strict=True):
        assert (row != pad).sum() <= (want != pad).sum() + 1  # the end token, where served
        assert row[: (want != pad).sum()].tolist() == want[want != pad].tolist()
