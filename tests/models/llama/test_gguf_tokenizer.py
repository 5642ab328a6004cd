"""The tokenizer a GGUF file carries: ids as `transformers` reads the same file, the chat
template rendered in a sandbox, `generate` and `chat` on strings, `.keras` round trip."""

import keras
import numpy as np
import pytest

from keras_attn.checkpoints import CheckpointError
from keras_attn.models import from_gguf
from tests.models.llama.gguf_files import (
    SPECIAL,
    byte_level_bpe_metadata,
    sentencepiece_metadata,
    write_llama_gguf,
)

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

PROBES = [
    "Héllo wörld, café naïve",
    "🤗🎉 emoji 👩\u200d👩\u200d👧",
    "你好，世界。日本語のテキスト",
    "def f(x):\n    return  x**2  # sq",
    "a   b\t\tc\n\n\nd    ",
    "12345 + 678 = 7023",
    "<|im_start|>user\nHi there<|im_end|>\n",
    "  leading and trailing  ",
    "I'm you're they'll WE'VE x  's",
    "a\u00a0\u00a0b\u3000c ६",
]


def _write(path, **tokenizer_options):
    metadata, reference = byte_level_bpe_metadata(**tokenizer_options)
    write_llama_gguf(path, vocabulary=len(metadata["token_list"]), tokenizer=metadata)
    return reference


@pytest.mark.slow
def test_a_gguf_files_tokenizer_gives_transformers_ids_and_chats(tmp_path):
    reference = _write(tmp_path / "model.gguf")
    model = from_gguf(tmp_path / "model.gguf")
    tokenizer = model.preprocessor.tokenizer
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file="model.gguf")
    probes = PROBES + ["the  theme\n\n\nthen 123  ", "<|im_start|>user\nthe them<|im_end|>\n"]
    for text, row in zip(probes, tokenizer(probes), strict=True):
        ids = [int(i) for i in row]
        assert ids == theirs(text, add_special_tokens=False).input_ids == reference.encode(text).ids
    # Start, end and padding as the file names them; no start token (add_bos_token False).
    ids = {t: i for i, t in enumerate(sorted(tokenizer.vocabulary, key=tokenizer.vocabulary.get))}
    start, end = ids["<|im_start|>"], ids["<|im_end|>"]
    assert model.preprocessor.special_ids() == (start, end, end)
    assert not model.preprocessor.add_start_token
    messages = [{"role": "user", "content": "the theme"}]
    prompt = tokenizer.apply_chat_template(messages)
    assert prompt == theirs.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False
    )
    reply = model.chat(messages, max_new_tokens=4)
    assert isinstance(reply, str)
    continued = model.generate("the them", max_length=10, strategy="greedy")
    assert continued.startswith("the them")
    # Saved and loaded whole: the tokenizer's files and settings travel in the assets.
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert loaded.preprocessor.tokenizer.chat_template == tokenizer.chat_template
    assert loaded.preprocessor.tokenizer.individual_digits
    assert loaded.generate("the them", max_length=10, strategy="greedy") == continued
    assert loaded.chat(messages, max_new_tokens=4) == reply


def test_a_sentencepiece_gguf_tokenizer_gives_transformers_ids(tmp_path):
    """A SentencePiece BPE (Llama 2's kind: a space before the text, byte fallback,
    digits apart) in a GGUF file: TensorFlow Text's kernel on the model rebuilt from the
    file gives the ids `transformers` reads the file to give; saved and loaded whole."""
    metadata = sentencepiece_metadata()
    path = tmp_path / "model.gguf"
    write_llama_gguf(path, vocabulary=len(metadata["token_list"]), tokenizer=metadata)
    model = from_gguf(path)
    tokenizer = model.preprocessor.tokenizer
    assert type(tokenizer).__name__ == "GGUFSentencePieceTokenizer"
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file=path.name)
    probes = PROBES + ["the  theme\n\n then 123  ", "  lead", "", "<start_of_turn>user\nthe"]
    for text, row in zip(probes, tokenizer(probes), strict=True):
        assert [int(i) for i in row] == theirs(text, add_special_tokens=False).input_ids, text
    # The start token as the file says (add_bos_token), as transformers adds it.
    assert model.preprocessor.generate_preprocess(["the them"])[0] == theirs("the them").input_ids
    continued = model.generate("the them", max_length=10, strategy="greedy")
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert loaded.preprocessor.tokenizer.space_prefix
    assert loaded.generate("the them", max_length=10, strategy="greedy") == continued


def test_chat_templates_run_sandboxed_and_errors_are_named(tmp_path):
    hostile = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    _write(tmp_path / "hostile.gguf", template=hostile)
    model = from_gguf(tmp_path / "hostile.gguf")
    with pytest.raises(ValueError, match="chat template failed"):
        model.chat([{"role": "user", "content": "hi"}])
    with pytest.raises(TypeError, match="messages"):
        model.chat("hi")
    with pytest.raises(ValueError, match="max_new_tokens >= 1"):
        model.chat([{"role": "user", "content": "hi"}], max_new_tokens=0)
    _write(tmp_path / "plain.gguf", template=None)
    with pytest.raises(ValueError, match="chat template"):
        from_gguf(tmp_path / "plain.gguf").chat([{"role": "user", "content": "hi"}])


def test_tokenizers_we_do_not_read_are_named_and_broken_ones_refused(tmp_path):
    # Another pre-tokenizer (GPT-4o's pattern): a warning, the model takes ids.
    _write(tmp_path / "gpt4o.gguf", pre="gpt-4o")
    with pytest.warns(UserWarning, match="'gpt-4o'.*token ids"):
        model = from_gguf(tmp_path / "gpt4o.gguf")
    assert model.preprocessor is None
    metadata, _ = byte_level_bpe_metadata()
    bad = dict(metadata, eos_token_id=10_000)
    write_llama_gguf(tmp_path / "eos.gguf", vocabulary=len(metadata["token_list"]), tokenizer=bad)
    with pytest.raises(
        CheckpointError, match="token id below .* for tokenizer.ggml.eos_token_id. Received: 10000"
    ):
        from_gguf(tmp_path / "eos.gguf")
    tokens = list(metadata["token_list"])
    tokens[-1] = tokens[-2]
    twice = dict(metadata, token_list=tokens)
    write_llama_gguf(tmp_path / "twice.gguf", vocabulary=len(tokens), tokenizer=twice)
    with pytest.raises(CheckpointError, match="repeats a token"):
        from_gguf(tmp_path / "twice.gguf")
    assert SPECIAL[0] in metadata["token_list"]
    # A count in the header larger than the file could hold: refused, nothing allocated.
    import struct

    write_llama_gguf(tmp_path / "huge.gguf", vocabulary=len(tokens), tokenizer=metadata)
    data = bytearray((tmp_path / "huge.gguf").read_bytes())
    at = data.index(b"tokenizer.ggml.tokens") + len(b"tokenizer.ggml.tokens") + 8
    data[at : at + 8] = struct.pack("<Q", 1 << 40)  # the token list's length
    (tmp_path / "huge.gguf").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="1099511627776 strings of tokenizer.ggml.tokens"):
        from_gguf(tmp_path / "huge.gguf")


SERVE = """
prompts = json.loads(sys.stdin.read())
loaded = tf.saved_model.load(sys.argv[1])
outputs = loaded.signatures["serving_default"](prompt=tf.constant(prompts))
answer = {
    "token_ids": outputs["token_ids"].numpy().tolist(),
    "texts": [text.hex() for text in outputs["text"].numpy()],
}
try:
    loaded.signatures["serve_token_ids"](
        token_ids=tf.constant([[5, -7]]), padding_mask=tf.constant([[1, 1]])
    )
    answer["negative id"] = "generated"
except tf.errors.InvalidArgumentError as error:
    answer["negative id"] = error.message
print(json.dumps(answer))
"""


@pytest.mark.slow  # an export and a server process: about a minute
def test_the_exported_generation_serves_pythons_greedy_tokens_without_keras(tmp_path):
    """The GGUF file's tokenizer and greedy decoding inside the SavedModel: a chat prompt
    and a plain one give, served without keras, the token ids Python's `generate` gives."""
    import json

    from keras_attn.export import export_saved_model
    from keras_attn.models import GenerationConfig
    from tests.helpers import TF_SERVING_PREAMBLE, script_answer

    _write(tmp_path / "model.gguf")
    model = from_gguf(tmp_path / "model.gguf")
    tokenizer = model.preprocessor.tokenizer
    prompts = [
        tokenizer.apply_chat_template([{"role": "user", "content": "the theme"}]),
        "the  them 12",
    ]
    end = model.preprocessor.special_ids()[1]
    generation = GenerationConfig(max_length=24, end_token_id=end)
    folder = export_saved_model(model, tokenizer, tmp_path / "served", generation=generation)
    served = script_answer(TF_SERVING_PREAMBLE + SERVE, folder, stdin=json.dumps(prompts))
    ids = model.preprocessor.generate_preprocess(prompts)
    config = model._generation_config(generation, None, {})
    expected = np.asarray(model._generate_ids(ids, config, True, False, False, pad_inside=True))
    for row, want, prompt in zip(served["token_ids"], expected, ids, strict=True):
        length = len(prompt)
        assert row[:length] == prompt
        new, want_new = row[length:], [int(t) for t in want[length:]]
        if end in want_new:  # after the end token the two pad differently
            want_new = want_new[: want_new.index(end) + 1]
        assert new[: len(want_new)] == want_new
    # The served text is UTF-8 (a random model's bytes often are not: U+FFFD for them),
    # and an id outside the vocabulary is refused, not generated from.
    for text in served["texts"]:
        bytes.fromhex(text).decode("utf-8")  # strict
    assert "Expected token_ids in [0, " in served["negative id"]


@pytest.mark.slow  # two exports, over 10 s: left out of `make test-fast`
def test_the_exported_generation_stops_where_generate_on_text_stops(tmp_path, monkeypatch):
    """With no `end_token_id` given, the export decodes to the preprocessor's end token
    (a chat reply's end of turn), as `generate(text)` does; one given is kept."""
    from keras_attn.export import export_saved_model
    from keras_attn.models import GenerationConfig

    _write(tmp_path / "model.gguf")
    model = from_gguf(tmp_path / "model.gguf")
    traced = []
    decode_function = type(model).decode_function

    def spy(self, generation, **options):
        traced.append(generation.end_token_id)
        return decode_function(self, generation, **options)

    # On the class: the export decodes with its serving copy of the model.
    monkeypatch.setattr(type(model), "decode_function", spy)
    tokenizer = model.preprocessor.tokenizer
    for name, end in (("default", None), ("given", 5)):
        generation = GenerationConfig(max_length=12, end_token_id=end)
        export_saved_model(model, tokenizer, tmp_path / name, generation=generation, warmup=False)
    assert traced == [model.preprocessor.special_ids()[1], 5]
    assert traced[0] == tokenizer.token_to_id("<|im_end|>")


def test_the_registry_names_the_files_the_tokenizers_keep():
    """The families register without TensorFlow (on JAX and PyTorch), so the registry
    names the two tokenizers' files itself: the names the tokenizers write."""
    from keras_attn.data import byte_level_bpe
    from keras_attn.models.gguf import sentencepiece_files as gguf_sentencepiece
    from keras_attn.models.gguf import tokenizers as gguf_tokenizers

    assert gguf_tokenizers.SENTENCEPIECE.files == gguf_sentencepiece.FILES
    assert gguf_tokenizers.BYTE_LEVEL_BPE.files == byte_level_bpe.FILES
