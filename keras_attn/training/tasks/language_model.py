"""`keras-attn lm`: a causal language model (GPT or Transformer-XL) on a corpus, with samples
in TensorBoard, or ELMo's biLM (both directions), whose layers feature-based heads read."""

import pathlib

import tensorflow as tf

from keras_attn.data import WordPieceTokenizer, language_model_windows
from keras_attn.data.wordpiece_tokenizer import write_vocabulary
from keras_attn.models import ElmoBiLM, GPTLanguageModel, TransformerXL
from keras_attn.models.elmo.elmo_bilm import character_table
from keras_attn.training.checkpoints import save_trained_model
from keras_attn.training.run_folder import vocabulary_hash
from keras_attn.training.task_configs import LanguageModelConfig, LanguageModelDataConfig
from keras_attn.training.tasks.corpus import split_corpus
from keras_attn.training.tasks.training_task import TrainingTask
from keras_attn.training.trainer import TrainingData


class LanguageModelTask(TrainingTask):
    """Trains a `GPTLanguageModel` on next-token prediction over document windows, a
    `TransformerXL` on windows of `segments` consecutive segments (the memory carried
    from one to the next inside each window), or an `ElmoBiLM` on both directions'
    predictions over the same windows (saved as `backbone.keras` too: what
    `keras-attn finetune --feature-based` reads)."""

    sections = {"model": LanguageModelConfig, "data": LanguageModelDataConfig}

    def prepare(self, run):
        train, held_out, vocabulary = split_corpus(run.data, run.training.seed)
        self.tokenizer = WordPieceTokenizer(vocabulary, sequence_length=run.model.sequence_length)
        self.run = run
        if run.model.architecture == "elmo":
            self.samples = None  # a biLM does not generate: no samples in TensorBoard
        length = run.model.sequence_length
        if run.model.architecture == "transformer_xl":
            length *= run.model.segments
        train_windows = language_model_windows(train, self.tokenizer, length)
        result = TrainingData(
            len(train_windows),
            self._example_fn(train_windows),
            tokens_per_example=length,
            batched=True,
        )
        if held_out:
            windows = language_model_windows(held_out, self.tokenizer, length)
            result.validation_examples, result.validation_fn = (
                len(windows),
                self._example_fn(windows),
            )
        return result

    def _example_fn(self, windows):
        windows, pad = tf.constant(windows), self.tokenizer.pad_id

        def examples(indices, seed):  # a batch at a time (`batched=True`)
            window = tf.gather(windows, indices)
            labels = window[:, 1:]
            return window[:, :-1], labels, tf.cast(labels != pad, tf.float32)

        def bidirectional(indices, seed):  # ELMo: each position's next and previous token
            window = tf.gather(windows, indices)
            inputs = window[:, :-1]
            previous = tf.pad(inputs[:, :-1], [[0, 0], [1, 0]], constant_values=pad)
            x = {"token_ids": inputs, "padding_mask": tf.cast(inputs != pad, tf.int32)}
            return x, {"forward_logits": window[:, 1:], "backward_logits": previous}

        return bidirectional if self.run.model.architecture == "elmo" else examples

    def build_model(self, run):
        model = run.model
        shared = dict(
            num_layers=model.num_layers,
            num_heads=model.num_heads,
            hidden_dim=model.hidden_dim,
            intermediate_dim=model.intermediate_dim,
            dropout=model.dropout,
            norm_first=model.norm_first,
            pad_token_id=self.tokenizer.pad_id,
        )
        if model.architecture == "elmo":
            vocabulary = self.tokenizer.vocabulary
            self.model = ElmoBiLM(
                len(vocabulary),
                num_layers=model.num_layers,
                hidden_dim=model.hidden_dim,
                projection_dim=model.projection_dim,
                dropout=model.dropout,
                character_cnn=model.character_cnn,
                pad_token_id=self.tokenizer.pad_id,
                character_table=character_table(vocabulary) if model.character_cnn else None,
            )
        elif model.architecture == "transformer_xl":
            self.model = TransformerXL(
                self.tokenizer.vocabulary_size,
                segment_length=model.sequence_length,
                memory_length=model.memory_length,
                # Farther distances share the training's longest (the paper's clamp_len).
                clamp_length=model.memory_length + model.sequence_length,
                **shared,
            )
        else:
            self.model = GPTLanguageModel(
                self.tokenizer.vocabulary_size,
                max_sequence_length=model.sequence_length,
                score=model.score,
                num_key_value_heads=model.num_key_value_heads,
                position_embedding=model.position_embedding,
                **shared,
            )
        return self.model

    def identity(self):
        """The vocabulary (learned from the corpus): a resumed run must share it."""
        return {"vocabulary": vocabulary_hash(self.tokenizer.vocabulary)}

    def samples(self):
        """Each prompt continued by top-p sampling (fixed seed: comparable from step to step)."""
        prompts = [p.strip() for p in self.run.data.prompts.split("|") if p.strip()]
        ids = self.tokenizer.tokenize(tf.constant(prompts)).to_list()
        bound = self.model.max_sequence_length  # None: Transformer-XL's relative positions
        length = max(self.run.data.sample_length, max(map(len, ids), default=0) + 1)
        length = length if bound is None else min(length, bound)
        generated = self.model.generate(
            ids, length, strategy="sample", top_p=0.9, seed=0, jit_compile=False
        )
        return list(zip(prompts, self.tokenizer.detokenize(generated), strict=True))

    def save(self, model, output_dir):
        output_dir = pathlib.Path(output_dir)
        save_trained_model(model, output_dir / "model.keras")
        if self.run.model.architecture == "elmo":  # the biLM is the feature-based backbone
            save_trained_model(model, output_dir / "backbone.keras")
        write_vocabulary(self.tokenizer.vocabulary, output_dir / "vocab.txt")
