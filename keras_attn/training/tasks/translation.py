"""`keras-attn seq2seq`: an encoder-decoder Transformer on sentence pairs, samples logged."""

import pathlib

import numpy as np
import tensorflow as tf

from keras_attn.cache_dir import default_cache_dir
from keras_attn.data import (
    WordPieceTokenizer,
    read_text_pairs,
    tatoeba_zh_en,
    train_wordpiece_vocabulary,
)
from keras_attn.data.wordpiece_tokenizer import write_vocabulary
from keras_attn.models import TransformerSeq2Seq
from keras_attn.training.checkpoints import save_trained_model
from keras_attn.training.config import ConfigError
from keras_attn.training.run_folder import vocabulary_hash
from keras_attn.training.task_configs import Seq2SeqDataConfig, Seq2SeqModelConfig
from keras_attn.training.tasks.training_task import TrainingTask
from keras_attn.training.trainer import TrainingData


def read_pairs(spec):
    """`tatoeba_zh_en` or a TSV file of `source<TAB>target` lines -> `ParallelTextData`."""
    if spec == "tatoeba_zh_en":
        return tatoeba_zh_en()
    if not pathlib.Path(spec).is_file():
        raise ConfigError(
            "data.pairs", f"'tatoeba_zh_en' or an existing TSV file; {spec!r} does not exist"
        )
    pairs = read_text_pairs(spec)
    if not len(pairs):
        raise ConfigError(
            "data.pairs",
            f"lines 'source<TAB>target' in {spec}; none could be read ({pairs.report.summary()})",
        )
    return pairs


class Seq2SeqTask(TrainingTask):
    """Trains a `TransformerSeq2Seq` with teacher forcing (label smoothing 0.1, the paper's)."""

    sections = {"model": Seq2SeqModelConfig, "data": Seq2SeqDataConfig}

    def prepare(self, run):
        data, length = run.data, run.model.max_length
        train, held_out = read_pairs(data.pairs).split(
            test_groups=data.held_out_sources, seed=run.training.seed
        )

        def tokenizer(texts, size):
            vocabulary = train_wordpiece_vocabulary(
                tf.data.Dataset.from_tensor_slices(texts),
                size,
                lowercase=data.lowercase,
                cache_dir=default_cache_dir(),
            )
            return WordPieceTokenizer(vocabulary, lowercase=data.lowercase, sequence_length=length)

        self.source_tokenizer = tokenizer(train.sources, data.source_vocabulary_size)
        self.target_tokenizer = tokenizer(train.targets, data.target_vocabulary_size)
        self.run, self.held_out = run, held_out
        train_arrays, validation_arrays = self._arrays(train), self._arrays(held_out)
        return TrainingData(
            len(train_arrays[0]),
            self._example_fn(*train_arrays),
            validation_examples=len(validation_arrays[0]),
            validation_fn=self._example_fn(*validation_arrays),
            tokens_per_example=2 * length,
            batched=True,
        )

    def _arrays(self, data):
        """Padded source ids and `[CLS] target [SEP]` ids; too-long pairs are left out."""
        length = self.run.model.max_length
        sources = self.source_tokenizer.tokenize(tf.constant(data.sources))
        targets = self.target_tokenizer.tokenize(tf.constant(data.targets))
        start, end = self.target_tokenizer.cls_id, self.target_tokenizer.sep_id
        targets = tf.concat(
            [tf.fill([targets.nrows(), 1], start), targets, tf.fill([targets.nrows(), 1], end)], 1
        )
        keep = (
            (sources.row_lengths() <= length)
            & (sources.row_lengths() > 0)
            & (targets.row_lengths() <= length + 1)
        ).numpy()  # decoder input and labels: length each
        print(f"seq2seq: {int(keep.sum())} of {len(data)} pairs within {length} tokens")
        sources = tf.ragged.boolean_mask(sources, keep).to_tensor(shape=[None, length])
        targets = tf.ragged.boolean_mask(targets, keep).to_tensor(shape=[None, length + 1])
        return np.asarray(sources, "int32"), np.asarray(targets, "int32")

    @staticmethod
    def _example_fn(sources, targets):
        sources, targets = tf.constant(sources), tf.constant(targets)

        def examples(indices, seed):  # a batch at a time (`batched=True`)
            target = tf.gather(targets, indices)
            x = {
                "encoder_token_ids": tf.gather(sources, indices),
                "decoder_token_ids": target[:, :-1],
            }
            return x, target[:, 1:], tf.cast(target[:, 1:] != 0, tf.float32)

        return examples

    def build_model(self, run):
        model = run.model
        self.model = TransformerSeq2Seq(
            self.source_tokenizer.vocabulary_size,
            target_vocabulary_size=self.target_tokenizer.vocabulary_size,
            num_layers=model.num_layers,
            num_heads=model.num_heads,
            hidden_dim=model.hidden_dim,
            intermediate_dim=model.intermediate_dim,
            dropout=model.dropout,
            norm_first=model.norm_first,
            score=model.score,
            max_sequence_length=model.max_length,
        )
        return self.model

    def identity(self):
        """Both vocabularies (learned from the pairs): a resumed run must share them."""
        return {
            "source_vocabulary": vocabulary_hash(self.source_tokenizer.vocabulary),
            "target_vocabulary": vocabulary_hash(self.target_tokenizer.vocabulary),
        }

    def samples(self):
        """The first held-out sources, greedy-decoded."""
        sources = self.held_out.sources[: self.run.data.samples]
        ids = self.source_tokenizer.tokenize(tf.constant(sources))[
            :, : self.run.model.max_length
        ].to_list()
        decoded = self.model.generate(
            ids,
            self.run.model.max_length,
            start_token_id=self.target_tokenizer.cls_id,
            end_token_id=self.target_tokenizer.sep_id,
            jit_compile=False,
        )
        return list(zip(sources, self.target_tokenizer.detokenize(decoded), strict=True))

    def save(self, model, output_dir):
        output_dir = pathlib.Path(output_dir)
        save_trained_model(model, output_dir / "model.keras")
        for name, tokenizer in (
            ("source", self.source_tokenizer),
            ("target", self.target_tokenizer),
        ):
            write_vocabulary(tokenizer.vocabulary, output_dir / f"{name}_vocab.txt")
