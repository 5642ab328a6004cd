"""The GPT family's registry entry: `GPTLanguageModel`, GPT-2's checkpoints and
byte-pair vocabulary, and GPT-1's fine-tuning (`keras-attn finetune --backbone LM_RUN`)."""

import pathlib

from keras_attn.models import registry
from keras_attn.models.functional_model import with_vocabulary_size
from keras_attn.models.gpt import keras_hub_gpt2
from keras_attn.models.gpt.gpt_finetuning import GPTFineTuner
from keras_attn.models.gpt.gpt_language_model import GPTLanguageModel


def _wordpiece(folder, sequence_length=128, lowercase=True):
    """A `keras-attn lm` run's vocabulary; GPT-1's packing once it holds its tokens."""
    from keras_attn.data import GPT1Tokenizer, WordPieceTokenizer
    from keras_attn.data.gpt1_tokenizer import GPT1_TOKENS
    from keras_attn.data.wordpiece_tokenizer import read_vocabulary

    vocabulary = read_vocabulary(pathlib.Path(folder) / "vocab.txt")
    gpt1 = all(token in vocabulary for token in GPT1_TOKENS)
    kind = GPT1Tokenizer if gpt1 else WordPieceTokenizer
    return kind(vocabulary, lowercase=lowercase, sequence_length=sequence_length)


def _add_gpt1_tokens(lm, tokenizer):
    """GPT-1's start, delimiter and extract tokens, added to the vocabulary (last) and to
    the language model's embedding (new rows)."""
    from keras_attn.data import GPT1Tokenizer

    vocabulary = GPT1Tokenizer.with_gpt1_tokens(tokenizer.vocabulary)
    tokenizer = GPT1Tokenizer(vocabulary, tokenizer.lowercase, tokenizer.sequence_length)
    if tokenizer.extract_id != len(vocabulary) - 1:
        raise ValueError("Expected [EXTRACT] to be the vocabulary's last token")
    if lm.vocabulary_size < len(vocabulary):
        lm = with_vocabulary_size(lm, len(vocabulary))
    return lm, tokenizer


def _gpt1_batch(inputs, labels, pad_id):
    """The token ids; the class and, for the auxiliary loss, each position's next token."""
    import tensorflow as tf

    token_ids = inputs["token_ids"]
    next_tokens = tf.pad(token_ids[:, 1:], [[0, 0], [0, 1]], constant_values=pad_id)
    return token_ids, {"logits": labels, "lm_logits": next_tokens}


def _classifier(backbone, num_classes, dropout, pooling, lm_weight=0.5):
    """GPT-1's classifier (texts) and entailment head (pairs: the packing differs only):
    the extract token is the vocabulary's last (`_add_gpt1_tokens`)."""
    return GPTFineTuner(
        backbone,
        "classification",
        num_classes,
        extract_token_id=backbone.vocabulary_size - 1,
        lm_weight=lm_weight,
        dropout=dropout,
    )


BYTE_PAIR_FILES = ("vocab.json", "merges.txt")


def _byte_pair(folder):
    """GPT-2's tokenizer from the `vocab.json` and `merges.txt` beside a `.keras` file."""
    if not all((pathlib.Path(folder) / name).is_file() for name in BYTE_PAIR_FILES):
        return None
    from keras_attn.data import gpt2_tokenizer

    return gpt2_tokenizer(folder)


def _load_byte_pair(folder, sequence_length=128, lowercase=True):
    """GPT-2's byte-level BPE (cased: `lowercase` does not apply; rows are not packed)."""
    from keras_attn.data import gpt2_tokenizer

    return gpt2_tokenizer(folder)


def _save_byte_pair(tokenizer, folder):
    from keras_attn.data.byte_pair import save_byte_pair_vocabulary

    save_byte_pair_vocabulary(tokenizer, folder, None)


# GPT-2's files, where a folder (a converted checkpoint, a preprocessor's assets) holds
# its byte-level BPE rather than a `keras-attn lm` run's WordPiece vocabulary.
BYTE_PAIR = registry.TokenizerFiles(
    BYTE_PAIR_FILES, _load_byte_pair, _save_byte_pair, classes=("GPT2Tokenizer",)
)


def _build_language_model(settings, tokenizer):
    """`keras-attn lm --architecture gpt`: learned (or sinusoidal, rotary) positions up
    to `sequence_length`, any score, grouped-query attention."""
    return GPTLanguageModel(
        tokenizer.vocabulary_size,
        **registry.decoder_arguments(settings, tokenizer),
        max_sequence_length=settings.sequence_length,
        score=settings.score,
        num_key_value_heads=settings.num_key_value_heads,
        position_embedding=settings.position_embedding,
    )


GPT = registry.register(
    registry.Family(
        name="gpt",
        backbone_cls=GPTLanguageModel,
        model_types=("gpt2",),
        twin=registry.HuggingFaceTwin(
            keras_file="model.keras",
            tokenizer_files=BYTE_PAIR_FILES,
            auto_class="AutoModelForCausalLM",
            read_tokenizer=_byte_pair,
            probe=registry.token_probe,
        ),
        signatures={GPTLanguageModel: "language_model", GPTFineTuner: "classifier"},
        heads={"classification": _classifier},
        head_options={"classification": ("lm_weight",)},
        tokenizer=registry.TokenizerFiles(
            ("vocab.txt",),
            _wordpiece,
            registry.WORDPIECE.save,
            or_else=BYTE_PAIR,
            classes=("GPT1Tokenizer",),
        ),
        adapt=_add_gpt1_tokens,
        classification_batch=_gpt1_batch,
        language_models=(registry.LanguageModel("gpt", _build_language_model),),
        keras_hub=registry.KerasHubTwin(
            backbone_classes=("GPT2Backbone",),
            to_ours=keras_hub_gpt2.to_ours,
            to_hub=keras_hub_gpt2.to_hub,
            tokenizer_to_ours=keras_hub_gpt2.tokenizer_to_ours,
            tokenizer_to_hub=keras_hub_gpt2.tokenizer_to_hub,
            parameters=keras_hub_gpt2.parameters,
            causal_lm_to_hub=keras_hub_gpt2.causal_lm_to_hub,
            adopt_tokenizer=keras_hub_gpt2.adopt_tokenizer,
        ),
    )
)
