"""The WordPiece vocabulary the export tests learn from Rotten Tomatoes (internal to the
tests): learned once per run and machine, then read back from keras_attn's vocabulary
cache by every other module and xdist worker (about 9 s saved each)."""

import tensorflow as tf

from keras_attn.cache_dir import default_cache_dir
from keras_attn.data import rotten_tomatoes
from keras_attn.data.wordpiece_tokenizer import train_wordpiece_vocabulary


def rotten_tomatoes_vocabulary(size=2000):
    """A `size`-piece uncased vocabulary of the first 3,000 Rotten Tomatoes snippets."""
    texts = tf.data.Dataset.from_tensor_slices(rotten_tomatoes(log=False).texts[:3000])
    return train_wordpiece_vocabulary(texts, size, cache_dir=default_cache_dir())
