"""Fixtures of the string-pipeline tests (tests/models/test_*_strings.py): Rotten
Tomatoes reviews and a tokenizer of each kind learned from them. TensorFlow is imported
inside them: the JAX and PyTorch runs collect this folder without it."""

import io

import numpy as np
import pytest

LENGTH = 24  # the tokenizers' packed length
SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32)  # tiny models
# Undoes an eager module's `eager` (conftest.py) for a test: keras-hub's byte-level BPE runs
# a `tf.function` with Python conditions inside tf.data's graph, which fails when functions
# run eagerly, so the cases of RoBERTa's and GPT-2's tokenizers stay traced.
TRACED = pytest.mark.eager(False)


@pytest.fixture(scope="session")
def reviews():
    from keras_attn.data import rotten_tomatoes

    data = rotten_tomatoes(log=False)
    return data.texts[:12], np.array(data.labels[:12], "int32"), data.texts[:2000]


def _roberta(texts, folder):
    """Files of a byte-level BPE with RoBERTa's special tokens, learned from `texts`."""
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(
        texts, vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    trainer.save_model(str(folder))
    return folder


def _deberta(texts):
    """A unigram SentencePiece model's bytes with DeBERTa's special pieces."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=400,
        model_type="unigram", pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]",
        bos_piece="[CLS]", eos_piece="[SEP]", unk_piece="[UNK]", minloglevel=2,
    )  # fmt: skip
    return model.getvalue()


@pytest.fixture(scope="session")
def sources(reviews, tmp_path_factory):
    """What each family's tokenizer is made from (learned once per worker)."""
    import tensorflow as tf

    from keras_attn.cache_dir import default_cache_dir
    from keras_attn.data import train_wordpiece_vocabulary

    corpus = reviews[2]
    # Kept in the vocabulary cache: learned once (12 s), read back by the other worker.
    vocabulary = train_wordpiece_vocabulary(
        tf.data.Dataset.from_tensor_slices(corpus), 400, cache_dir=default_cache_dir()
    )
    return {
        "wordpiece": vocabulary,
        "bpe": _roberta(corpus, tmp_path_factory.mktemp("bpe")),
        "spm": _deberta(corpus),
    }


@pytest.fixture
def tokenizers(sources):
    """Each family's tokenizer, made in the test: TensorFlow Text's kernel resources do
    not outlive the session Keras clears after every test."""
    from keras_attn.data import GPT1Tokenizer, WordPieceTokenizer
    from keras_attn.models.deberta.deberta_tokenizer import DebertaV3Tokenizer
    from keras_attn.models.roberta.roberta_tokenizer import RobertaTokenizer

    wordpiece = WordPieceTokenizer(sources["wordpiece"], sequence_length=LENGTH)
    gpt1 = GPT1Tokenizer(GPT1Tokenizer.with_gpt1_tokens(wordpiece.vocabulary), True, LENGTH)
    return {
        "bert": wordpiece,
        "gpt": gpt1,
        "roberta": RobertaTokenizer.from_folder(sources["bpe"], sequence_length=LENGTH),
        "deberta": DebertaV3Tokenizer(sources["spm"], sequence_length=LENGTH),
    }


@pytest.fixture
def tiny_preset(tokenizers, tmp_path):
    """A preset folder as `keras-attn finetune` leaves a backbone: a tiny BERT's
    `backbone.keras` and the WordPiece `vocab.txt` beside it."""
    from keras_attn.models import BertBackbone

    tokenizer = tokenizers["bert"]
    backbone = BertBackbone.from_size(
        "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=LENGTH, **SIZE
    )
    folder = tmp_path / "preset"
    folder.mkdir()
    backbone.save(folder / "backbone.keras")
    (folder / "vocab.txt").write_text("\n".join(tokenizer.vocabulary) + "\n")
    return folder
