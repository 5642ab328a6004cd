"""The SentencePiece tokenizer of a GGUF file (`tokenizer.ggml.model` `"llama"`: Gemma's,
Llama 2's, TinyLlama's), rebuilt as a SentencePiece model for TensorFlow Text's kernel.

A GGUF file keeps SentencePiece's pieces, scores and types but not the model's other
settings; `sentencepiece_proto` writes them as `transformers` reads such a file (and as
llama.cpp tokenizes): BPE over the scores with byte fallback, no normalisation beyond
spaces written `▁`, digits apart. Where the file says `add_space_prefix` (Llama 2's,
not Gemma's) a space goes before the text as `transformers` puts it: unless the text is
empty, starts with a space or with a special token (SentencePiece's own dummy prefix
would add one in each case, and llama.cpp after every special token). Two of the file's
conventions need translating: its control tokens (`<start_of_turn>`, `<pad>`) are
matched in text as `transformers` matches its added tokens (user-defined pieces here,
`<unk>` the one unknown piece), and its user-defined runs of spaces (Gemma's `"  "`)
are written with `▁`, as SentencePiece sees spaces once normalised.
"""

import functools
import re

import keras

from keras_attn.checkpoints.checkpoint_errors import CheckpointError

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SETTINGS_FILE = "sentencepiece.json"
MODEL_FILE = "tokenizer.spm"
FILES = (MODEL_FILE, SETTINGS_FILE)
SETTINGS = (
    "start_token",
    "end_token",
    "pad_token",
    "chat_template",
    "space_prefix",
    "special_tokens",
)


def sentencepiece_proto(tokens, scores, types, unknown="<unk>", split_digits=True):
    """The serialized SentencePiece `ModelProto` of a GGUF file's vocabulary."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    model = model_pb2.ModelProto()
    spec = model.trainer_spec
    spec.model_type = model_pb2.TrainerSpec.BPE
    spec.vocab_size = len(tokens)
    spec.byte_fallback = True
    spec.split_digits = bool(split_digits)
    spec.split_by_whitespace = False
    spec.allow_whitespace_only_pieces = True
    spec.unk_id = tokens.index(unknown) if unknown in tokens else -1
    spec.bos_id = spec.eos_id = spec.pad_id = -1  # the preprocessor adds them
    normalizer = model.normalizer_spec
    normalizer.name = "identity"
    normalizer.add_dummy_prefix = False  # `space_prefix` does it as transformers does
    normalizer.remove_extra_whitespaces = False
    normalizer.escape_whitespaces = True
    if spec.unk_id < 0:
        raise CheckpointError(f"a SentencePiece vocabulary needs {unknown!r}")
    for index, (token, score, kind) in enumerate(zip(tokens, scores, types, strict=True)):
        if not token or kind == BYTE and not _BYTE_PIECE.fullmatch(token):
            raise CheckpointError(
                f"token {index} ({token!r}) is not a SentencePiece piece"
                + (" of type BYTE (<0x00> to <0xFF>)" if token else " (empty)")
            )
        piece = model.pieces.add()
        if token == unknown:
            kind = UNKNOWN
        elif kind == CONTROL:
            kind = USER_DEFINED  # matched in text, as transformers' added tokens
        if kind == USER_DEFINED:
            token = token.replace(" ", "\u2581")
        if kind not in (NORMAL, UNKNOWN, USER_DEFINED, UNUSED, BYTE):
            raise CheckpointError(f"token {token!r} has type {kind}, not SentencePiece's")
        piece.piece, piece.score, piece.type = token, float(score), kind
    proto = model.SerializeToString()
    import sentencepiece

    try:  # the checks of TensorFlow Text's kernel, which is this same library
        sentencepiece.SentencePieceProcessor(model_proto=proto)
    except (RuntimeError, OSError) as error:
        raise CheckpointError(f"not a SentencePiece model: {error}") from None
    return proto


_BYTE_PIECE = re.compile("<0x[0-9A-F]{2}>")


@functools.cache
def tokenizer_class():
    """`GGUFSentencePieceTokenizer`, defined on first use (keras-hub imported only then), once."""
    return _define()


def _define():
    import keras_hub

    from keras_attn.data.chat_templates import ChatTokenizerMixin

    @keras.saving.register_keras_serializable(package="keras_attn")
    class GGUFSentencePieceTokenizer(
        ChatTokenizerMixin, keras_hub.tokenizers.SentencePieceTokenizer
    ):
        """keras-hub's SentencePiece tokenizer (TensorFlow Text's kernel, always) on a
        GGUF file's vocabulary, with its start, end and padding tokens and chat template.

        Args:
            proto: the serialized SentencePiece model (`sentencepiece_proto`).
            sequence_length: pad or cut every row to this many ids (`None`: ragged).
            start_token: the token a text starts with (`<bos>`).
            end_token: the end token (`<eos>`).
            pad_token: the padding token (`<pad>`).
            chat_template: the file's Jinja chat template, or `None`.
            space_prefix: put a space before a text that starts with neither a space
                nor one of `special_tokens` (`add_space_prefix`, as `transformers`).
            special_tokens: the tokens matched whole in text.
            **kwargs: keras-hub `SentencePieceTokenizer` arguments.
        """

        def tokenize(self, inputs):
            if self.space_prefix:
                inputs = self._with_space_prefix(inputs)
            return super().tokenize(inputs)

        def _detokenize_tf(self, inputs):
            outputs = super()._detokenize_tf(inputs)
            if self.space_prefix:  # the space `tokenize` put first, off as SentencePiece's
                import tensorflow as tf  # decode takes its dummy prefix off

                outputs = tf.strings.regex_replace(outputs, "^ ", "")
            return outputs

        def _with_space_prefix(self, inputs):
            import re

            import tensorflow as tf

            texts = tf.convert_to_tensor(inputs)
            starts = ["[ ]"] + [re.escape(t) for t in self.special_tokens_in_text]
            kept = tf.strings.regex_full_match(texts, f"(?s)(?:{'|'.join(starts)}).*|")
            return tf.where(kept, texts, tf.strings.join([" ", texts]))

        def __init__(
            self,
            proto=None,
            sequence_length=None,
            start_token=None,
            end_token=None,
            pad_token=None,
            chat_template=None,
            space_prefix=False,
            special_tokens=(),
            **kwargs,
        ):
            kwargs["_allow_python_workflow"] = False
            self.space_prefix = bool(space_prefix)
            self.special_tokens_in_text = list(special_tokens)
            self._set_chat_tokens(start_token, end_token, pad_token, chat_template)
            super().__init__(proto=proto, sequence_length=sequence_length, **kwargs)

        def get_config(self):
            config = super().get_config()
            config.update(
                **self._chat_config(),
                space_prefix=self.space_prefix,
                special_tokens=self.special_tokens_in_text,
            )
            return config

    return GGUFSentencePieceTokenizer


def save_files(tokenizer, folder):
    """The tokenizer's SentencePiece model (`tokenizer.spm`) and its settings."""
    import json
    import pathlib

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MODEL_FILE).write_bytes(tokenizer.proto)
    config = tokenizer.get_config()
    settings = {k: config[k] for k in SETTINGS}
    (folder / SETTINGS_FILE).write_text(json.dumps(settings, ensure_ascii=False, indent=1))


def load_files(folder, sequence_length=None, lowercase=None):
    """The tokenizer `save_files` wrote (a `UserInputError` names a damaged file)."""
    import json
    import pathlib

    from keras_attn.errors import UserInputError

    folder = pathlib.Path(folder)
    try:
        settings = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserInputError(f"{folder / SETTINGS_FILE}: not JSON ({error})") from None
    if not isinstance(settings, dict):
        raise UserInputError(f"{folder / SETTINGS_FILE}: expected an object")
    try:
        return tokenizer_class()(
            proto=(folder / MODEL_FILE).read_bytes(),
            **{key: settings[key] for key in SETTINGS if key in settings},
        )
    except Exception as error:  # what TensorFlow Text's SentencePiece kernel raises
        raise UserInputError(
            f"{folder / MODEL_FILE}: not a SentencePiece model ({type(error).__name__})"
        ) from None
