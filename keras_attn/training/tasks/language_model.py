"""`keras-attn lm`: a language model on a corpus, of any architecture the registry holds
(`keras_attn.models.registry.language_models()`: GPT, Transformer-XL and ELMo's biLM
ship), with samples in TensorBoard for those that generate."""

import pathlib

import tensorflow as tf

from keras_attn.data import WordPieceTokenizer, language_model_windows
from keras_attn.data.wordpiece_tokenizer import write_vocabulary
from keras_attn.models import registry
from keras_attn.training.checkpoints import save_trained_model
from keras_attn.training.run_folder import vocabulary_hash
from keras_attn.training.task_configs import LanguageModelConfig, LanguageModelDataConfig
from keras_attn.training.tasks.corpus import split_corpus
from keras_attn.training.tasks.training_task import TrainingTask
from keras_attn.training.trainer import TrainingData


class LanguageModelTask(TrainingTask):
    """Trains the registered language model `model.architecture` names
    (`registry.LanguageModel`: how it is built, how long a training window is, what it
    predicts of a window) on windows of the corpus; one that generates gets samples in
    TensorBoard, one whose layers serve features is saved as `backbone.keras` too (what
    `keras-attn finetune --feature-based` reads)."""

    sections = {"model": LanguageModelConfig, "data": LanguageModelDataConfig}

    def prepare(self, run):
        self.entry = registry.language_model(run.model.architecture)  # checked at load
        train, held_out, vocabulary = split_corpus(run.data, run.training.seed)
        self.tokenizer = WordPieceTokenizer(vocabulary, sequence_length=run.model.sequence_length)
        self.run = run
        if not self.entry.generates:
            self.samples = None  # nothing to sample in TensorBoard
        length = self.entry.window(run.model)
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
        windows, pad, targets = tf.constant(windows), self.tokenizer.pad_id, self.entry.targets

        def examples(indices, seed):  # a batch at a time (`batched=True`)
            return targets(tf.gather(windows, indices), pad)

        return examples

    def build_model(self, run):
        self.model = self.entry.build(run.model, self.tokenizer)
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
        if self.entry.features:  # the feature-based heads' backbone
            save_trained_model(model, output_dir / "backbone.keras")
        write_vocabulary(self.tokenizer.vocabulary, output_dir / "vocab.txt")
