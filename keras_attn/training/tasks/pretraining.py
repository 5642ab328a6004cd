"""`keras-attn pretrain`: a backbone pre-trained by an objective its family registers."""

import pathlib

import numpy as np
import tensorflow as tf

from keras_attn.data import MaskedLMMasker, SentencePairSampler, WordPieceTokenizer
from keras_attn.data.wordpiece_tokenizer import write_vocabulary
from keras_attn.models import registry
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
    """Pre-trains a backbone on a corpus of documents with the objective's recipe, which
    its model family registers (`registry.pretraining`): BERT's `BertPretrainer`
    (objectives `mlm`, `nsp`, `sop`) and ELECTRA's `ElectraPretrainer` (`electra`) on a
    `BertBackbone`, `XLNetPretrainer` on an `XLNetBackbone` (`xlnet`), ERNIE's
    `ErniePretrainer` with WordNet's entities linked in the data pipeline (`ernie`)."""

    sections = {"model": PretrainModelConfig, "data": PretrainDataConfig}

    def prepare(self, run):
        model, data = run.model, run.data
        recipe = registry.pretraining(model.objective)
        mask_rate, random_rate = recipe.masking
        if model.mask_token_rate is not None:
            mask_rate = model.mask_token_rate
        if model.random_token_rate is not None:
            random_rate = model.random_token_rate
        if mask_rate + random_rate > 1:
            raise ConfigError(
                "model.mask_token_rate",
                f"a sum with model.random_token_rate of at most 1, got {mask_rate} + {random_rate}",
            )
        train, held_out, vocabulary = split_corpus(data, run.training.seed)
        self.tokenizer = WordPieceTokenizer(vocabulary, sequence_length=model.sequence_length)
        masker = MaskedLMMasker(
            len(vocabulary),
            self.tokenizer.mask_id,
            self.tokenizer.special_token_ids,
            mask_token_rate=mask_rate,
            random_token_rate=random_rate,
            max_predictions_per_seq=data.max_predictions_per_seq
            or max(1, round(0.15 * model.sequence_length)),
        )
        self.piece_counts = piece_counts(self.tokenizer, train)
        objective, make_example = recipe.sentence_pairs, recipe.examples
        options = recipe.sampler_options(model, self.tokenizer) if recipe.sampler_options else {}
        self.sampler_options = options
        train_pairs = SentencePairSampler(self.tokenizer, train, objective=objective, **options)
        result = TrainingData(
            len(train_pairs.anchors),
            make_example(train_pairs, masker),
            tokens_per_example=model.sequence_length,
            batched=True,
        )
        if held_out:
            held_out_pairs = SentencePairSampler(
                self.tokenizer, held_out, objective=objective, **options
            )
            result.validation_examples = len(held_out_pairs.anchors)
            result.validation_fn = make_example(held_out_pairs, masker)
        return result

    def build_model(self, run):
        recipe = registry.pretraining(run.model.objective)
        model, self.backbone = recipe.build(
            run.model, self.tokenizer, run.training.seed, self.piece_counts
        )
        return model

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
        # `model` may be a copy of the one built (a run of several processes saves one
        # put together from the shards): the backbone is its own, found by name.
        backbone = next(
            (
                layer
                for layer in model._flatten_layers()
                if layer.name == self.backbone.name and type(layer) is type(self.backbone)
            ),
            self.backbone,
        )
        save_trained_model(backbone, output_dir / "backbone.keras")
        write_vocabulary(self.tokenizer.vocabulary, output_dir / "vocab.txt")
        for option in getattr(self, "sampler_options", {}).values():
            if hasattr(option, "save_assets"):  # ERNIE's linker: entities.txt, its licence
                option.save_assets(output_dir)


def piece_counts(tokenizer, documents, batch_size=4096):
    """How often each vocabulary id occurs in `documents` (lists of sentences), each
    sentence tokenised alone (special tokens and padding not counted)."""
    sentences = [s for document in documents for s in document]
    counts = np.zeros((tokenizer.vocabulary_size,), "int64")
    special = list(tokenizer.special_token_ids)
    for start in range(0, len(sentences), batch_size):
        ids = tokenizer(tf.constant(sentences[start : start + batch_size]))["token_ids"].numpy()
        counts += np.bincount(ids.ravel(), minlength=tokenizer.vocabulary_size)
    counts[special] = 0
    return counts


def probe_inputs(backbone, tokenizer, text, text_pair=None):
    """`(backbone, inputs, tokens)` for `AttentionImages`: one tokenised probe and its pieces."""
    inputs = tokenizer(tf.constant([text]), None if text_pair is None else tf.constant([text_pair]))
    inputs = {k: v.numpy() for k, v in inputs.items()}
    length = int(inputs["padding_mask"][0].sum())
    tokens = [tokenizer.vocabulary[i] for i in inputs["token_ids"][0, :length]]
    return backbone, inputs, tokens
