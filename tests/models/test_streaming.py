"""Streaming: `generate(text, stream=True)` and `chat(..., stream=True)` yield the text as
it is decoded, in whole characters, joined equal to what `generate` / `chat` return (stop
strings and seeded sampling included); the ids themselves on every backend are
tests/models/test_families.py's."""

import pytest

from keras_attn.models.streaming import stream_text


def test_pieces_come_as_tokens_come_and_never_end_inside_a_character():
    """A character whose bytes two tokens carry waits for the second; a piece is yielded
    as soon as its token is read (the next is not pulled before)."""
    pieces = {1: b"a", 2: b"\xc3", 3: b"\xa9", 4: b"b", 5: b"\xe4\xbd"}
    pulled = []

    def tokens(ids):
        for token in ids:
            pulled.append(token)
            yield token

    def detokenize(row):
        return b"".join(pieces[i] for i in row).decode("utf-8", errors="replace")

    stream = stream_text(tokens([1, 2, 3, 4, 5]), detokenize)
    assert next(stream) == "a" and pulled == [1]
    assert next(stream) == "é" and pulled == [1, 2, 3]  # "\xc3" alone is no character
    assert next(stream) == "b"
    assert list(stream) == ["\ufffd"]  # cut at the end: what `generate` returns then
    pulled.clear()
    stopped = stream_text(tokens([1, 2, 3, 4, 1, 1]), detokenize, ("éb",))
    assert list(stopped) == ["a", "é", "b"] and pulled == [1, 2, 3, 4]  # ends at the string


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A random Llama GGUF file whose greedy tokens are pieces of two characters or more."""
    pytest.importorskip("gguf")
    from keras_attn.models import from_gguf
    from tests.models.llama.gguf_files import write_text_llama_gguf

    return from_gguf(write_text_llama_gguf(tmp_path_factory.mktemp("streaming") / "model.gguf"))


@pytest.mark.slow  # a prefill and a step traced per setting and length: about 15 s
def test_streamed_text_is_generates_and_chats(model):
    """Traced without XLA here (the compiles took most of the test's time); compiled
    streams are tests/models/test_families.py's."""
    prompt = "the them"
    whole = model.generate(prompt, max_length=30, jit_compile=False)
    pieces = list(model.generate(prompt, max_length=30, jit_compile=False, stream=True))
    assert len(pieces) > 5 and all(pieces)
    assert "".join(pieces) == whole[len(prompt) :]
    stop = whole[len(prompt) :][6:9]
    stopped = model.generate(prompt, max_length=30, jit_compile=False, stop_strings=stop)
    assert (
        "".join(
            model.generate(prompt, max_length=30, jit_compile=False, stream=True, stop_strings=stop)
        )
        == (stopped[len(prompt) :])
    )
    sampled = [
        "".join(
            model.generate(
                prompt, max_length=30, jit_compile=False, stream=True, strategy="sample", seed=s
            )
        )
        for s in (1, 1, 2)
    ]
    assert sampled[0] == sampled[1] != sampled[2]
    messages = [{"role": "user", "content": "the theme"}]
    reply = model.chat(messages, max_new_tokens=12, jit_compile=False)
    assert "".join(model.chat(messages, max_new_tokens=12, stream=True, jit_compile=False)) == reply


@pytest.mark.slow  # the module's model: out of `make test-fast`
def test_what_cannot_stream_is_refused_when_called(model):
    with pytest.raises(ValueError, match="strategy 'greedy' or 'sample' with `stream=True`"):
        model.generate("the", max_length=8, stream=True, strategy="beam")
    with pytest.raises(ValueError, match="one string prompt"):
        model.generate(["the", "them"], max_length=8, stream=True)
    with pytest.raises(ValueError, match="return_log_probs=False"):
        model.generate("the", max_length=8, stream=True, return_log_probs=True)
    with pytest.raises(ValueError, match="greater than the longest prompt"):
        model.generate("the them the them", max_length=2, stream=True)
