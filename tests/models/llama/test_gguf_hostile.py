"""Crafted GGUF files, as a hostile user hands them to `from_gguf` and to `keras-attn
evaluate --model`: every count, size, float and type the header or metadata claims is
checked before anything is allocated, each refusal one `CheckpointError` naming the file
and the key, within seconds."""

import math
import struct
import time

import pytest

from keras_attn.checkpoints import CheckpointError
from keras_attn.models import from_gguf
from tests.models.llama.gguf_files import (
    byte_level_bpe_metadata,
    gguf_header,
    gguf_string,
    sentencepiece_metadata,
    write_llama_gguf,
)

pytest.importorskip("gguf")

UINT8, INT32, STRING, ARRAY, UINT32 = 0, 5, 8, 9, 4


def _refused(path, match, seconds=10):
    start = time.monotonic()
    with pytest.raises(CheckpointError, match=match):
        from_gguf(path)
    assert time.monotonic() - start < seconds


def test_array_lengths_the_file_cannot_hold_are_refused_at_once(tmp_path):
    # The probe's 108-byte file: a UINT8 array claiming 10^12 items.
    path = tmp_path / "huge.gguf"
    arch = ("general.architecture", STRING, gguf_string("llama"))
    array = ("tokenizer.ggml.token_type", ARRAY, struct.pack("<IQ", UINT8, 10**12) + b"\0" * 40)
    path.write_bytes(gguf_header(arch, array))
    _refused(path, r"1000000000000 items of tokenizer.ggml.token_type at byte \d+ need")
    # An INT32 array whose bytes left are a multiple of 4: still more than the file holds.
    array = ("tokenizer.ggml.token_type", ARRAY, struct.pack("<IQ", INT32, 10**9) + b"\0" * 64)
    path.write_bytes(gguf_header(arch, array))
    _refused(path, "1000000000 items of tokenizer.ggml.token_type")
    # Arrays nested 200,000 deep: llama.cpp reads no array of arrays, nor do we.
    nested = struct.pack("<IQ", ARRAY, 1) * 200_000 + struct.pack("<IQ", UINT8, 0)
    path.write_bytes(gguf_header(arch, ("deep", ARRAY, nested)))
    _refused(path, "deep is an array of arrays")
    # A string, a key or a tensor count past the end; an unknown value type.
    path.write_bytes(gguf_header(arch, ("name", STRING, struct.pack("<Q", 1 << 62))))
    _refused(path, "4611686018427387904 bytes of name")
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 40) + b"\0" * 64)
    _refused(path, "1099511627776 keys")
    path.write_bytes(gguf_header(arch, tensors=1 << 50))
    _refused(path, "1125899906842624 tensors")
    path.write_bytes(gguf_header(arch, ("odd", 77, b"\0" * 16)))
    _refused(path, "odd has value type 77")
    path.write_bytes(b"GGUF" + struct.pack("<I", 1) + b"\0" * 30)
    _refused(path, "GGUF version 1")


def test_tensor_descriptions_are_checked_against_the_file(tmp_path):
    write_llama_gguf(tmp_path / "whole.gguf")
    data = bytearray((tmp_path / "whole.gguf").read_bytes())
    name = b"token_embd.weight"
    at = data.index(name) + len(name)  # then: dims (u32), the dims (u64 each), type, offset
    for patch, match in (
        ((at, struct.pack("<I", 9)), "token_embd.weight has 9 dimensions"),
        ((at + 4, struct.pack("<Q", 1 << 40)), "token_embd.weight's .* lie past the end"),
        ((at + 4 + 16, struct.pack("<I", 999)), "token_embd.weight has type 999"),
        ((at + 4 + 16 + 4, struct.pack("<Q", 1 << 60)), "lie past the end of the file"),
    ):
        crafted = bytearray(data)
        crafted[patch[0] : patch[0] + len(patch[1])] = patch[1]
        (tmp_path / "crafted.gguf").write_bytes(bytes(crafted))
        _refused(tmp_path / "crafted.gguf", match)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("llama.rope.freq_base", math.nan, "finite positive number for llama.rope.freq_base"),
        ("llama.rope.freq_base", math.inf, "finite positive number for llama.rope.freq_base"),
        ("llama.attention.layer_norm_rms_epsilon", math.nan, "layer_norm_rms_epsilon"),
        ("llama.attention.layer_norm_rms_epsilon", 0.0, "layer_norm_rms_epsilon"),
        ("llama.attention.layer_norm_rms_epsilon", -1e-5, "layer_norm_rms_epsilon"),
        ("llama.attention.head_count", 0, "positive integer .* for llama.attention.head_count"),
        ("llama.attention.head_count_kv", 0, "llama.attention.head_count_kv"),
        ("llama.block_count", 0, "llama.block_count"),
        ("llama.embedding_length", 2.5, "llama.embedding_length"),
        ("llama.context_length", "128", "llama.context_length"),
        ("llama.rope.scaling.type", 3, "a string for llama.rope.scaling.type"),
    ],
)
def test_sizes_and_floats_in_the_metadata_are_checked(tmp_path, key, value, match):
    write_llama_gguf(tmp_path / "model.gguf", metadata={key: value})
    _refused(tmp_path / "model.gguf", match)


def test_the_tokenizers_flags_template_and_merges_must_have_their_types(tmp_path):
    metadata, _ = byte_level_bpe_metadata()
    size = len(metadata["token_list"])

    def crafted(changes, **tokenizer):
        """The byte-level BPE file with `changes` written as strings or UINT32s."""
        path = tmp_path / "crafted.gguf"
        kept = {k: v for k, v in dict(metadata, **tokenizer).items() if v is not None}
        write_llama_gguf(path, vocabulary=size, tokenizer=kept, metadata=changes)
        return path

    path = crafted({"tokenizer.ggml.add_bos_token": "no"}, add_bos_token=None)
    _refused(path, "a GGUF BOOL for tokenizer.ggml.add_bos_token. Received: 'no'")
    path = crafted({"tokenizer.chat_template": 5}, chat_template=None)
    _refused(path, "a string for tokenizer.chat_template. Received: 5")
    merges = list(metadata["token_merges"])
    merges[7] = "t h e"
    _refused(crafted({}, token_merges=merges), r"merges\[7\]='t h e'")
    merges[7] = "the"
    _refused(crafted({}, token_merges=merges), r"merges\[7\]='the'")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ("empty", r"token 5 \(''\) is not a SentencePiece piece \(empty\)"),
        ("byte", r"token 5 .* of type BYTE"),
        ("nan", "finite numbers, one a token, for tokenizer.ggml.scores|list of finite numbers"),
    ],
)
def test_sentencepiece_vocabularies_the_kernel_rejects_are_named(tmp_path, change, match):
    metadata = sentencepiece_metadata()
    tokens, types = list(metadata["token_list"]), list(metadata["token_types"])
    scores = list(metadata["token_scores"])
    normal = next(i for i, kind in enumerate(types) if kind == 1 and i > 5)
    tokens[5], types[5], scores[5] = tokens[normal] + "x", 1, scores[5]
    if change == "empty":
        tokens[5] = ""
    elif change == "byte":
        types[5] = 6  # a normal piece typed BYTE
    else:
        scores[5] = math.nan
    crafted = dict(metadata, token_list=tokens, token_types=types, token_scores=scores)
    write_llama_gguf(tmp_path / "spm.gguf", vocabulary=len(tokens), tokenizer=crafted)
    _refused(tmp_path / "spm.gguf", match)


def test_a_space_prefix_is_not_left_before_the_decoded_text(tmp_path):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    metadata = sentencepiece_metadata(space_prefix=True)
    write_llama_gguf(
        tmp_path / "spm.gguf", vocabulary=len(metadata["token_list"]), tokenizer=metadata
    )
    tokenizer = from_gguf(tmp_path / "spm.gguf").preprocessor.tokenizer
    # SentencePiece's own decode of the same pieces, with its dummy prefix on.
    proto = model_pb2.ModelProto.FromString(tokenizer.proto)
    proto.normalizer_spec.add_dummy_prefix = True
    reference = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
    for text in ("the theme", "  then there", "a café, naïve 🤗"):
        ids = [int(i) for i in tokenizer(text)]
        assert tokenizer.detokenize(ids) == reference.decode(ids)
    assert tokenizer.detokenize([int(i) for i in tokenizer("the theme")]) == "the theme"


def test_the_cli_ends_a_crafted_file_in_one_error_line(tmp_path, capsys):
    from keras_attn.cli import main as cli

    path = tmp_path / "huge.gguf"
    arch = ("general.architecture", STRING, gguf_string("llama"))
    array = ("tokenizer.ggml.token_type", ARRAY, struct.pack("<IQ", UINT8, 10**12) + b"\0" * 40)
    path.write_bytes(gguf_header(arch, array))
    (tmp_path / "r.csv").write_text("text,label\ngood,1\nbad,0\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["evaluate", "--model", str(path), "--data", str(tmp_path / "r.csv")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: ") and "items of tokenizer.ggml.token_type" in lines[0]
