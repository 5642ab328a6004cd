"""The tokenizer a GGUF file carries in its metadata (`tokenizer.ggml.*`), as an
in-graph tokenizer, and the causal-LM preprocessor that puts it on the model.

- `tokenizer.ggml.model` `"gpt2"`: a byte-level BPE (SmolLM2's), the tokens and merges as
  they are (`keras_attn.data.byte_level_bpe`), control (type 3) and user-defined (4)
  tokens kept whole in text, the pre-tokenizer named by `tokenizer.ggml.pre`: those whose
  splitting is GPT-2's (`smollm` also splits digits apart), Llama 3's or Qwen 2's.
- `"llama"`: SentencePiece (Gemma's, Llama 2's), the pieces, scores and types rebuilt as
  a SentencePiece model for TensorFlow Text (`keras_attn.models.gguf.sentencepiece_files`).

Any other kind is named in an `UnsupportedTokenizer` rather than tokenized differently
from llama.cpp and `transformers`.
"""

from keras_attn.checkpoints.checkpoint_errors import CheckpointError
from keras_attn.models.tokenizer_files import TokenizerFiles

# The files a folder keeps each tokenizer in (`keras_attn.models.gguf.sentencepiece_files.FILES`,
# `keras_attn.data.byte_level_bpe.FILES`, which need TensorFlow: named here so that the
# families register on JAX and PyTorch too; tests/models/llama/test_gguf_tokenizer.py
# holds the two equal).
SENTENCEPIECE_FILES = ("tokenizer.spm", "sentencepiece.json")
BYTE_LEVEL_BPE_FILES = ("vocab.json", "merges.txt", "byte_level_bpe.json")

# `tokenizer.ggml.pre` -> the pattern it splits with and whether digits are split apart
# first (`keras_attn.data.byte_level_bpe.SPLITS`), as llama.cpp and `transformers` read it.
BYTE_LEVEL_PRE = {
    "gpt-2": ("gpt2", False),
    "default": ("gpt2", False),
    "smollm": ("gpt2", True),
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "smaug-bpe", "dbrx"), ("llama3", False)),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen"), ("qwen2", False)),
}
_CONTROL, _USER_DEFINED = 3, 4


class UnsupportedTokenizer(CheckpointError):
    """A GGUF file's tokenizer of a kind not read yet (its model still loads)."""


def tokenizer(file):
    """The in-graph tokenizer of an opened `GGUFFile`: a `ByteLevelBPETokenizer` or a
    `GGUFSentencePieceTokenizer`; a `CheckpointError` names what is wrong with it."""
    from keras_attn.data import byte_level_bpe
    from keras_attn.models.gguf import sentencepiece_files

    kind = file.get("tokenizer.ggml.model")
    pre = file.get("tokenizer.ggml.pre", "default")
    if not (kind == "gpt2" and pre in BYTE_LEVEL_PRE or kind == "llama"):
        raise UnsupportedTokenizer(
            f"{file.path}: its tokenizer (tokenizer.ggml.model {kind!r}, pre {pre!r}) is "
            "not one we read yet (SentencePiece 'llama', or byte-level BPE 'gpt2' with pre "
            f"in {sorted(BYTE_LEVEL_PRE)})"
        )
    tokens = file.get("tokenizer.ggml.tokens")
    types = file.get("tokenizer.ggml.token_type") or [1] * len(tokens or ())
    if not isinstance(tokens, list) or not tokens or len(types) != len(tokens):
        raise CheckpointError(f"{file.path}: tokenizer.ggml.tokens or token_type missing")
    if len(set(tokens)) != len(tokens):
        raise CheckpointError(f"{file.path}: tokenizer.ggml.tokens repeats a token")

    def token(key):  # an id in the vocabulary: `GGUFFile` checked it (`check_metadata`)
        index = file.get(f"tokenizer.ggml.{key}_token_id")
        return None if index is None else tokens[index]

    end = token("eos")
    special = dict(
        start_token=token("bos") or end,
        end_token=end,
        pad_token=token("padding") or end,
        chat_template=file.get("tokenizer.chat_template"),
    )
    try:
        if kind == "llama":
            scores = file.get("tokenizer.ggml.scores")
            if not isinstance(scores, list) or len(scores) != len(tokens):
                raise CheckpointError(f"{file.path}: tokenizer.ggml.scores missing")
            proto = sentencepiece_files.sentencepiece_proto(
                tokens, scores, types, unknown=token("unknown") or "<unk>"
            )
            return sentencepiece_files.tokenizer_class()(
                proto=proto,
                space_prefix=bool(file.get("tokenizer.ggml.add_space_prefix", True)),
                special_tokens=[
                    t
                    for t, k in zip(tokens, types, strict=True)
                    if k in (_CONTROL, _USER_DEFINED) and t.strip()
                ],
                **special,
            )
        return byte_level_bpe.tokenizer_class()(
            vocabulary={t: i for i, t in enumerate(tokens)},
            merges=file.get("tokenizer.ggml.merges", []),  # a BPE may have none
            special_tokens=[
                t for t, k in zip(tokens, types, strict=True) if k in (_CONTROL, _USER_DEFINED)
            ],
            split=BYTE_LEVEL_PRE[pre][0],
            individual_digits=BYTE_LEVEL_PRE[pre][1],
            **special,
        )
    except CheckpointError as error:
        raise CheckpointError(f"{file.path}: its tokenizer: {error}") from None
    except ValueError as error:
        raise CheckpointError(f"{file.path}: its tokenizer: {error}") from None


def reads_start_token(file):
    """Whether the model of an opened `GGUFFile` reads its start token before every
    text (`tokenizer.ggml.add_bos_token`: Gemma's do, SmolLM2's does not)."""
    return bool(file.get("tokenizer.ggml.add_bos_token", False))


def preprocessor(file, config, family):
    """The `CausalLMPreprocessor` of the file's tokenizer for the model of its Hugging
    Face `config` (the start token put before a text only where the file says
    `add_bos_token`)."""
    from keras_attn.models.lm_preprocessors import CausalLMPreprocessor

    return CausalLMPreprocessor(
        tokenizer(file),
        family=family,
        sequence_length=min(int(config.get("max_position_embeddings") or 2048), 2048),
        add_start_token=reads_start_token(file),
    )


def attach(file, config, family, overrides):
    """Puts the file's preprocessor into the model's constructor `overrides` (unless
    one is given); a kind not read yet is named in a warning, the model then taking ids."""
    import warnings

    if file.get("tokenizer.ggml.model") is None or "preprocessor" in overrides:
        return
    try:
        overrides["preprocessor"] = preprocessor(file, config, family)
    except UnsupportedTokenizer as error:
        warnings.warn(f"{error}; the model takes token ids", stacklevel=4)


def _load_sentencepiece(folder, sequence_length=None, lowercase=None):
    from keras_attn.models.gguf import sentencepiece_files

    return sentencepiece_files.load_files(folder, sequence_length, lowercase)


def _save_sentencepiece(tokenizer, folder):
    from keras_attn.models.gguf import sentencepiece_files

    sentencepiece_files.save_files(tokenizer, folder)


def _load_byte_level_bpe(folder, sequence_length=None, lowercase=None):
    from keras_attn.data import byte_level_bpe

    return byte_level_bpe.load_files(folder, sequence_length, lowercase)


def _save_byte_level_bpe(tokenizer, folder):
    from keras_attn.data import byte_level_bpe

    byte_level_bpe.save_files(tokenizer, folder)


# What a saved preprocessor's assets hold of a GGUF file's tokenizer: the SentencePiece
# model rebuilt from it and its settings (start, end and padding tokens, chat template).
SENTENCEPIECE = TokenizerFiles(
    SENTENCEPIECE_FILES,
    _load_sentencepiece,
    _save_sentencepiece,
    classes=("GGUFSentencePieceTokenizer",),
)
# vocab.json, merges.txt and the settings a byte-level BPE adds (special tokens, digits
# apart, its chat template); a Llama file's tokenizer may be SentencePiece instead.
BYTE_LEVEL_BPE = TokenizerFiles(
    BYTE_LEVEL_BPE_FILES,
    _load_byte_level_bpe,
    _save_byte_level_bpe,
    or_else=SENTENCEPIECE,
    classes=("ByteLevelBPETokenizer",),
)
