"""The tokenizer a GGUF file carries in its metadata (`tokenizer.ggml.*`), as an
in-graph tokenizer, and the causal-LM preprocessor that puts it on the model.

`tokenizer.ggml.model` `"gpt2"` is a byte-level BPE (SmolLM2's): the tokens and merges
as they are, the control tokens (type 3) and user-defined ones (type 4) kept whole in
text, and the pre-tokenizer named by `tokenizer.ggml.pre`; only those whose splitting is
GPT-2's are read (`smollm` also splits digits apart). Any other is refused by name
rather than tokenized differently from llama.cpp and `transformers`.
"""

from keras_attn.checkpoints.checkpoint_errors import CheckpointError

# `tokenizer.ggml.pre` -> whether digits are split apart first; each is GPT-2's pattern.
BYTE_LEVEL_PRE = {"gpt-2": False, "default": False, "smollm": True}
_CONTROL, _USER_DEFINED = 3, 4


class UnsupportedTokenizer(CheckpointError):
    """A GGUF file's tokenizer of a kind not read yet (its model still loads)."""


def tokenizer(file):
    """The `ByteLevelBPETokenizer` of an opened `GGUFFile`, or a `CheckpointError`
    naming the tokenizer kind it does not read yet."""
    from keras_attn.data.byte_level_bpe import tokenizer_class

    kind = file.get("tokenizer.ggml.model")
    pre = file.get("tokenizer.ggml.pre", "default")
    if kind != "gpt2" or pre not in BYTE_LEVEL_PRE:
        raise UnsupportedTokenizer(
            f"{file.path}: its tokenizer (tokenizer.ggml.model {kind!r}, pre {pre!r}) is "
            f"not one we read yet (byte-level BPE 'gpt2' with pre in {sorted(BYTE_LEVEL_PRE)})"
        )
    tokens = file.get("tokenizer.ggml.tokens")
    merges = file.get("tokenizer.ggml.merges", [])  # a BPE may have none
    types = file.get("tokenizer.ggml.token_type") or [1] * len(tokens or ())
    if not isinstance(tokens, list) or not isinstance(merges, list) or len(types) != len(tokens):
        raise CheckpointError(f"{file.path}: tokenizer.ggml.tokens, merges or types missing")
    vocabulary = {token: i for i, token in enumerate(tokens)}
    if len(vocabulary) != len(tokens):
        raise CheckpointError(f"{file.path}: tokenizer.ggml.tokens repeats a token")
    special = [
        t for t, kind in zip(tokens, types, strict=True) if kind in (_CONTROL, _USER_DEFINED)
    ]

    def token(key):
        index = file.get(f"tokenizer.ggml.{key}_token_id")
        if index is None:
            return None
        if not isinstance(index, int) or not 0 <= index < len(tokens):
            raise CheckpointError(f"{file.path}: tokenizer.ggml.{key}_token_id {index!r}")
        return tokens[index]

    end = token("eos")
    try:
        return tokenizer_class()(
            vocabulary=vocabulary,
            merges=merges,
            special_tokens=special,
            individual_digits=BYTE_LEVEL_PRE[pre],
            start_token=token("bos") or end,
            end_token=end,
            pad_token=token("padding") or end,
            chat_template=file.get("tokenizer.chat_template"),
        )
    except ValueError as error:
        raise CheckpointError(f"{file.path}: its tokenizer: {error}") from None


def preprocessor(file, config):
    """The `CausalLMPreprocessor` of the file's tokenizer for the model of its Hugging
    Face `config` (the start token put before a text only where the file says
    `add_bos_token`)."""
    from keras_attn.models.lm_preprocessors import CausalLMPreprocessor

    return CausalLMPreprocessor(
        tokenizer(file),
        family="llama",
        sequence_length=min(int(config.get("max_position_embeddings") or 2048), 2048),
        add_start_token=bool(file.get("tokenizer.ggml.add_bos_token", False)),
    )
