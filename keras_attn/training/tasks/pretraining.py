"""`keras-attn pretrain`: BERT's masked LM + next-sentence (or sentence-order) prediction."""

import pathlib

import tensorflow as tf

from keras_attn.data import (
    MaskedLMMasker,
    SentencePairSampler,
    WordPieceTokenizer,
    bert_pretraining_example,
    electra_pretraining_example,
)
from keras_attn.data.wordpiece_tokenizer import write_vocabulary
from keras_attn.models import (
    BERT_SIZES,
    BertBackbone,
    BertPretrainer,
    ElectraPretrainer,
    XLNetBackbone,
    XLNetPretrainer,
    registry,
)
from keras_attn.training.checkpoints import save_trained_model
from keras_attn.training.config import ConfigError
from keras_attn.training.run_folder import vocabulary_hash
from keras_attn.training.task_configs import PretrainDataConfig, PretrainModelConfig
from keras_attn.training.tasks.corpus import split_corpus
from keras_attn.training.tasks.training_task import TrainingTask
from keras_attn.training.trainer import TrainingData

PROBE = (
    "In the beginning God created the heaven and the earth.",
    "And the earth was without form, and void.",
)


class BertPretrainingTask(TrainingTask):
    """Pre-trains a `BertBackbone` on a corpus of documents: with `BertPretrainer`
    (objective `nsp` or `sop`) or as ELECTRA's discriminator (`ElectraPretrainer`); or
    an `XLNetBackbone` of the preset's size with `XLNetPretrainer` (objective `xlnet`)."""

    sections = {"model": PretrainModelConfig, "data": PretrainDataConfig}

    def prepare(self, run):
        model, data = run.model, run.data
        train, held_out, vocabulary = split_corpus(data, run.training.seed)
        self.tokenizer = WordPieceTokenizer(vocabulary, sequence_length=model.sequence_length)
        masker = MaskedLMMasker(
            len(vocabulary),
            self.tokenizer.mask_id,
            self.tokenizer.special_token_ids,
            max_predictions_per_seq=data.max_predictions_per_seq
            or max(1, round(0.15 * model.sequence_length)),
        )
        objective = "none" if model.objective in ("mlm", "electra", "xlnet") else model.objective
        make_example = {
            "electra": electra_pretraining_example,
            "xlnet": xlnet_pretraining_example,
        }.get(model.objective, bert_pretraining_example)
        train_pairs = SentencePairSampler(self.tokenizer, train, objective=objective)
        result = TrainingData(
            len(train_pairs.anchors),
            make_example(train_pairs, masker),
            tokens_per_example=model.sequence_length,
            batched=True,
        )
        if held_out:
            held_out_pairs = SentencePairSampler(self.tokenizer, held_out, objective=objective)
            result.validation_examples = len(held_out_pairs.anchors)
            result.validation_fn = make_example(held_out_pairs, masker)
        return result

    def build_model(self, run):
        model = run.model
        if model.objective == "xlnet":
            size = dict(BERT_SIZES[model.preset])
            self.backbone = XLNetBackbone(
                self.tokenizer.vocabulary_size,
                intermediate_dim=4 * size["hidden_dim"],
                dropout=model.dropout,
                initializer_range=model.initializer_range,
                **size,
            )
            return XLNetPretrainer(
                self.backbone,
                partial_prediction=model.partial_prediction,
                special_token_ids=self.tokenizer.special_token_ids,
                seed=run.training.seed,
            )
        self.backbone = BertBackbone.from_size(
            model.preset,
            vocabulary_size=self.tokenizer.vocabulary_size,
            max_sequence_length=model.sequence_length,
            dropout=model.dropout,
            norm_first=model.norm_first,
            initializer_range=model.initializer_range,
            score=model.score,
        )
        if model.objective == "electra":
            return ElectraPretrainer(
                electra_generator(self.backbone, model.generator_fraction),
                self.backbone,
                rtd_weight=model.rtd_weight,
                seed=run.training.seed,
            )
        sentence_objective = "none" if model.objective == "mlm" else model.objective
        return BertPretrainer(self.backbone, sentence_objective=sentence_objective)

    def identity(self):
        """The vocabulary (learned from the corpus): a resumed run must share it."""
        return {"vocabulary": vocabulary_hash(self.tokenizer.vocabulary)}

    def probe(self):
        if not registry.family_of(self.backbone).attention_maps:
            return None  # e.g. no attention images of XLNet's two streams
        return probe_inputs(self.backbone, self.tokenizer, *PROBE)

    def save(self, model, output_dir):
        output_dir = pathlib.Path(output_dir)
        save_trained_model(model, output_dir / "model.keras")
        save_trained_model(self.backbone, output_dir / "backbone.keras")
        write_vocabulary(self.tokenizer.vocabulary, output_dir / "vocab.txt")


def xlnet_pretraining_example(sampler, masker):
    """`(anchor, seed) -> x`: an unmasked sentence pair (`token_ids`, `segment_ids`,
    `padding_mask`) for `XLNetPretrainer`, which draws its own factorisation orders
    (`masker` is unused: XLNet masks nothing)."""

    def example(anchor, seed):
        pair = sampler(tf.cast(anchor, tf.int32), seed)
        return {name: pair[name] for name in ("token_ids", "segment_ids", "padding_mask")}

    return example


def electra_generator(discriminator, fraction):
    """ELECTRA's generator for `discriminator`: as deep, `fraction` as wide (hidden size,
    heads, feed-forward), on the discriminator's embeddings."""
    if not 0 < fraction <= 1:
        raise ConfigError(
            "model.generator_fraction", f"a fraction in (0, 1] (the paper: 1/4 to 1/2); {fraction}"
        )
    heads = max(1, round(discriminator.num_heads * fraction))
    head_dim = max(1, round(discriminator.hidden_dim * fraction / heads))
    return BertBackbone(
        discriminator.vocabulary_size,
        num_layers=discriminator.num_layers,
        num_heads=heads,
        hidden_dim=heads * head_dim,
        intermediate_dim=max(1, round(discriminator.intermediate_dim * fraction)),
        max_sequence_length=discriminator.max_sequence_length,
        num_segments=discriminator.num_segments,
        dropout=discriminator.dropout,
        norm_first=discriminator.norm_first,
        score=discriminator.score,
        activation=discriminator.activation,
        layer_norm_epsilon=discriminator.layer_norm_epsilon,
        initializer_range=discriminator.initializer_range,
        name="generator",
        shared_embeddings=discriminator,  # built sharing: ElectraPretrainer need not rebuild it
    )


def probe_inputs(backbone, tokenizer, text, text_pair=None):
    """`(backbone, inputs, tokens)` for `AttentionImages`: one tokenised probe and its pieces."""
    inputs = tokenizer(tf.constant([text]), None if text_pair is None else tf.constant([text_pair]))
    inputs = {k: v.numpy() for k, v in inputs.items()}
    length = int(inputs["padding_mask"][0].sum())
    tokens = [tokenizer.vocabulary[i] for i in inputs["token_ids"][0, :length]]
    return backbone, inputs, tokens
