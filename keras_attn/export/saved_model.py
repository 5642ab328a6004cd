"""SavedModels that take raw text: tokenizer, packer and model in one graph.

Built on `keras.export.ExportArchive`. Every signature has named inputs and
outputs and `None` batch (and sequence) dimensions; outputs are float32 (or int64 /
string) whatever precision the model trained in, since TF Serving's REST layer
rejects half precision. Texts longer than the tokenizer's `sequence_length` are cut
(round-robin between the two texts of a pair), as in training.
"""

import pathlib
import re

import keras
import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.models import BertBackbone, BertClassifier


@keras_attn_export("keras_attn.export.next_version_dir")
def next_version_dir(base, name):
    """`base/name/N`, N one more than the highest integer version there (1 if none).

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.export import next_version_dir
    >>> base = pathlib.Path(tempfile.mkdtemp())
    >>> (base / "sentiment" / "3").mkdir(parents=True)
    >>> next_version_dir(base, "sentiment").name
    '4'
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(name)):
        raise ValueError(f"Expected a model name of letters, digits, '_', '.', '-'. Received: name={name!r}")
    folder = pathlib.Path(base) / name
    versions = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []
    return folder / str(max(versions, default=0) + 1)


@keras_attn_export("keras_attn.export.export_saved_model")
def export_saved_model(model, tokenizer, path, labels=None, text_pair=False):
    """Writes `model` with `tokenizer` as a SavedModel for TF Serving (tag `serve`).

    Signatures (all outputs float32 unless said):
    - classifier (`BertClassifier`): `serving_default` takes `text` (and
      `text_pair` with `text_pair=True`) strings `(batch,)` and returns
      `probabilities` `(batch, classes)`, `label_ids` int64 and `labels` strings;
      `serve_token_ids` takes `token_ids`, `segment_ids`, `padding_mask` int32
      `(batch, length)` and returns `logits` and `probabilities`.
    - backbone (`BertBackbone`): `serving_default` takes `text` and returns
      `embeddings` (the mean of the token vectors, L2-normalised: sentence
      embeddings) and `pooled_output`; `serve_token_ids` returns `sequence_output`
      and `pooled_output`.

    Args:
        model: a `BertClassifier` or `BertBackbone`.
        tokenizer: the `WordPieceTokenizer` it was trained with.
        path: the version folder to write (see `next_version_dir`); must not exist.
        labels: the class names, in id order (classifiers; default `"0"`, `"1"`, ...).
        text_pair: the classifier takes sentence pairs.

    Returns:
        `path`, as a `pathlib.Path`.

    Example:

    >>> import tempfile, pathlib, tensorflow as tf
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import export_saved_model
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "."]
    >>> model = BertClassifier(BertBackbone.from_preset("tiny", vocabulary_size=8), num_classes=2)
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "sentiment" / "1"
    >>> _ = export_saved_model(model, WordPieceTokenizer(vocab, sequence_length=16), path, labels=["neg", "pos"])
    >>> served = tf.saved_model.load(str(path)).signatures["serving_default"]
    >>> sorted(served(text=tf.constant(["good ."])))
    ['label_ids', 'labels', 'probabilities']
    """
    path = pathlib.Path(path)
    if path.exists():
        raise ValueError(f"Expected a new version folder. Received: path={str(path)!r} (exists)")
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(tokenizer)
    ids_spec = [tf.TensorSpec([None, None], tf.int32, name=n) for n in ("token_ids", "segment_ids", "padding_mask")]
    text_spec = tf.TensorSpec([None], tf.string, name="text")

    def token_inputs(token_ids, segment_ids, padding_mask):
        return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}

    if isinstance(model, BertClassifier):
        names = tf.constant([str(n) for n in (labels or range(model.num_classes))])
        if names.shape[0] != model.num_classes:
            raise ValueError(f"Expected {model.num_classes} labels. Received: labels={labels!r}")

        def classify(inputs):
            logits = tf.cast(model(inputs, training=False), tf.float32)
            probabilities = tf.nn.softmax(logits, axis=-1)
            label_ids = tf.argmax(probabilities, axis=-1)
            return logits, probabilities, label_ids, tf.gather(names, label_ids)

        if text_pair:
            def serve_text(text, text_pair):
                _, probabilities, label_ids, label_names = classify(tokenizer(text, text_pair))
                return {"probabilities": probabilities, "label_ids": label_ids, "labels": label_names}

            text_signature = [text_spec, tf.TensorSpec([None], tf.string, name="text_pair")]
        else:
            def serve_text(text):
                _, probabilities, label_ids, label_names = classify(tokenizer(text))
                return {"probabilities": probabilities, "label_ids": label_ids, "labels": label_names}

            text_signature = [text_spec]

        def serve_token_ids(token_ids, segment_ids, padding_mask):
            logits, probabilities, _, _ = classify(token_inputs(token_ids, segment_ids, padding_mask))
            return {"logits": logits, "probabilities": probabilities}

    elif isinstance(model, BertBackbone):
        def embed(inputs):
            outputs = model(inputs, training=False)
            sequence = tf.cast(outputs["sequence_output"], tf.float32)
            mask = tf.cast(inputs["padding_mask"], tf.float32)[..., None]
            mean = tf.reduce_sum(sequence * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
            return sequence, tf.cast(outputs["pooled_output"], tf.float32), tf.math.l2_normalize(mean, axis=-1)

        def serve_text(text):
            _, pooled, embeddings = embed(tokenizer(text))
            return {"embeddings": embeddings, "pooled_output": pooled}

        def serve_token_ids(token_ids, segment_ids, padding_mask):
            sequence, pooled, _ = embed(token_inputs(token_ids, segment_ids, padding_mask))
            return {"sequence_output": sequence, "pooled_output": pooled}

        text_signature = [text_spec]
    else:
        raise TypeError(f"Expected a BertClassifier or BertBackbone. Received: {type(model).__name__}")
    archive.add_endpoint("serving_default", serve_text, input_signature=text_signature)
    archive.add_endpoint("serve_token_ids", serve_token_ids, input_signature=ids_spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    archive.write_out(str(path), verbose=False)
    # The graph holds the vocabulary as a constant of the tokenizer op; the file is
    # for people and clients that tokenise themselves (`serve_token_ids`).
    (path / "assets").mkdir(exist_ok=True)
    (path / "assets" / "vocab.txt").write_text("\n".join(tokenizer.vocabulary) + "\n", encoding="utf-8")
    return path
