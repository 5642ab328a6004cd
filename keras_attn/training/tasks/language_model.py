"""`keras-attn lm`: a language model on a corpus, of any architecture the registry holds
(`keras_attn.models.registry.language_models()`: GPT, Llama, Transformer-XL and ELMo's
biLM ship), or a trained decoder read from a GGUF file (`model.base`: SmolLM2, Gemma 3)
trained on, with LoRA or whole; samples in TensorBoard for those that generate."""

import hashlib
import pathlib

import numpy as np
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer, language_model_windows
from keras_attn.data.wordpiece_tokenizer import write_vocabulary
from keras_attn.models import registry
from keras_attn.training.checkpoints import save_trained_model
from keras_attn.training.config import ConfigError
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
        self.run = run
        base = run.model.base
        train, held_out, vocabulary = split_corpus(
            run.data, run.training.seed, learn_vocabulary=base is None
        )
        if base is None:
            self.entry = registry.language_model(run.model.architecture)  # checked at load
            self.base = None
            self.tokenizer = WordPieceTokenizer(
                vocabulary, sequence_length=run.model.sequence_length
            )
            separator, self.pad_id, start = None, self.tokenizer.pad_id, None
        else:
            self.base = BaseDecoder(base)
            self.entry = registry.LanguageModel("base", self.base.build)
            self.tokenizer = self.base.tokenizer
            separator, self.pad_id = self.base.separator_id, self.base.pad_id
            start = self.base.start_id
        if not self.entry.generates:
            self.samples = None  # nothing to sample in TensorBoard
        length = self.entry.window(run.model)
        if self.base is not None and length > self.base.positions:
            raise ConfigError(
                "model.sequence_length",
                f"at most {self.base.positions}, the base model's context length; got {length}",
            )

        def windows_of(documents):
            return language_model_windows(
                documents, self.tokenizer, length, separator, self.pad_id, start
            )

        train_windows = windows_of(train)
        result = TrainingData(
            len(train_windows),
            self._example_fn(train_windows),
            tokens_per_example=length,
            batched=True,
        )
        if held_out:
            windows = windows_of(held_out)
            result.validation_examples, result.validation_fn = (
                len(windows),
                self._example_fn(windows),
            )
        return result

    def _example_fn(self, windows):
        windows, pad, targets = tf.constant(windows), self.pad_id, self.entry.targets

        def examples(indices, seed):  # a batch at a time (`batched=True`)
            return targets(tf.gather(windows, indices), pad)

        return examples

    @property
    def evaluate_first(self):
        """A base decoder's validation metrics before training (the trainer's
        `before_val_*`): the figure the run is compared with."""
        return self.base is not None

    def build_model(self, run):
        self.model = self.entry.build(run.model, self.tokenizer)
        return self.model

    def identity(self):
        """The vocabulary (learned from the corpus), or the base file's SHA-256: a resumed
        run must share it."""
        if self.base is not None:
            return {"base": self.base.digest()}
        return {"vocabulary": vocabulary_hash(self.tokenizer.vocabulary)}

    def samples(self):
        """Each prompt continued by top-p sampling (fixed seed: comparable from step to step)."""
        prompts = [p.strip() for p in self.run.data.prompts.split("|") if p.strip()]
        ids = _token_lists(self.tokenizer.tokenize(tf.constant(prompts)))
        start = [] if self.base is None or self.base.start_id is None else [self.base.start_id]
        ids = [start + row for row in ids]  # a model that reads a start token first gets it
        bound = self.model.max_sequence_length  # None: Transformer-XL's relative positions
        length = max(self.run.data.sample_length, max(map(len, ids), default=0) + 1)
        length = length if bound is None else min(length, bound)
        generated = self.model.generate(
            ids, length, strategy="sample", top_p=0.9, seed=0, jit_compile=False
        )
        texts = self.tokenizer.detokenize(np.asarray(generated)[:, len(start) :])
        texts = [  # a sampled byte-level reply may end inside a character
            t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t)
            for t in _token_lists(texts)
        ]
        return list(zip(prompts, texts, strict=True))

    def save(self, model, output_dir):
        output_dir = pathlib.Path(output_dir)
        save_trained_model(model, output_dir / "model.keras")
        if self.entry.features:  # the feature-based heads' backbone
            save_trained_model(model, output_dir / "backbone.keras")
        if self.base is not None:  # the file's tokenizer, where export and evaluate read it
            registry.tokenizer_files(model).write(self.tokenizer, output_dir)
        else:
            write_vocabulary(self.tokenizer.vocabulary, output_dir / "vocab.txt")


def _token_lists(values):
    """A ragged tensor, a tensor or lists (what tokenizers give) -> Python lists."""
    if hasattr(values, "to_list"):
        return values.to_list()
    if hasattr(values, "numpy"):
        return values.numpy().tolist()
    return [list(row) if isinstance(row, (list, tuple)) else row for row in values]


class BaseDecoder:
    """`model.base`: a trained decoder in a GGUF file (or the name of a packaged one,
    `keras_attn.models.gguf.reader.PACKAGED`), its tokenizer read at once (the
    training windows need it), the model when the trainer builds it.

    Sentences of a document are joined by the tokenizer's newline token where a newline
    after a text is one token (a byte-level BPE's `Ċ`, Gemma's `\n`: the same ids as the
    text with newlines), else by its end token; every window starts with the start token
    where the file says the model reads one first (`tokenizer.ggml.add_bos_token`:
    Gemma's; without it Gemma 3 270M's held-out KJV loss was 7.8 where SmolLM2's was
    3.3); windows are padded with its padding token (weighted 0).
    """

    def __init__(self, name):
        from keras_attn.checkpoints import CheckpointError
        from keras_attn.models.gguf import tokenizers as gguf_tokenizers
        from keras_attn.models.gguf.reader import PACKAGED, GGUFFile, packaged_gguf

        try:
            self.path = packaged_gguf(name)
            self.file = file = GGUFFile(self.path)
            self.tokenizer = gguf_tokenizers.tokenizer(file)
        except CheckpointError as error:
            raise ConfigError(
                "model.base",
                f"a GGUF file whose model and tokenizer we read, or one of {sorted(PACKAGED)} "
                f"({error})",
            ) from None
        text, line = _token_lists(self.tokenizer.tokenize(tf.constant(["a", "a\n"])))
        newline = line[len(text) :] if line[: len(text)] == text else []
        self.pad_id = int(self.tokenizer.pad_token_id)
        end = int(self.tokenizer.end_token_id)
        self.separator_id = int(newline[0]) if len(newline) == 1 else end
        # The positions the model was trained on (llama.cpp's context length).
        positions = file.get(f"{file.architecture()}.context_length")
        self.positions = positions if isinstance(positions, int) else 2048
        self.start_id = None
        if gguf_tokenizers.reads_start_token(file):
            self.start_id = int(self.tokenizer.start_token_id)

    def build(self, settings, tokenizer):
        """The file's model (`from_gguf`), with the run's dropout while it trains."""
        from keras_attn.models import from_gguf

        return from_gguf(self.file, dropout=settings.dropout)  # the file parsed once

    def digest(self):
        """The SHA-256 of the file (a resumed run must start from the same weights)."""
        digest = hashlib.sha256()
        with open(self.path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
