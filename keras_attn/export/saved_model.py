"""SavedModels that take raw text: tokenizer, packer and model in one graph.

Built on `keras.export.ExportArchive`. Every signature has named inputs and
outputs and `None` batch (and sequence) dimensions; outputs are float32 (or int64 /
string) whatever precision the model trained in, since TF Serving's REST layer
rejects half precision. Texts are cleaned before tokenising (invalid UTF-8 bytes
become U+FFFD) and cut to the tokenizer's `sequence_length` pieces (round-robin
between the two texts of a pair), as in training.
"""

import pathlib

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_attn.api_export import keras_attn_export
from keras_attn.export.versions import publish, split_target, staging_folder
from keras_attn.data.task_inputs import multiple_choice_inputs, span_qa_inputs, tagging_inputs
from keras_attn.layers.layer_utils import core_tensorflow_ops_only
from keras_attn.models import (BertBackbone, BertClassifier, BertMultipleChoice, BertSpanQA,
                               BertTokenClassifier, GPTLanguageModel, TransformerSeq2Seq)
from keras_attn.models.generation import check_generation_arguments

PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"
WARMUP_FILE = "tf_serving_warmup_requests"
# Words of raw text for the tagger: runs of non-space characters, with each
# punctuation or symbol character a word of its own (BERT's basic tokenizer).
WORD_DELIMITERS = r"\s+|[\p{P}\p{S}]"
KEPT_DELIMITERS = r"[\p{P}\p{S}]"
# What a span-QA export answers when the context has no word piece to point at.
NO_ANSWER_SCORE = -1e9


def _strings(name):
    return tf.TensorSpec([None], tf.string, name=name)


def _ids(name, rank=2):
    return tf.TensorSpec([None] * rank, tf.int32, name=name)


def clean_text(text):
    """Strings with invalid UTF-8 made valid (bad bytes -> U+FFFD), in the graph."""
    return tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)


def _float32(x):
    return tf.cast(x, tf.float32)


def _token_inputs(token_ids, segment_ids, padding_mask):
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


class _Signatures:
    """The signatures of one model: `{name: (function, input specs)}`, the warm-up
    inputs of each, and which ones are TF Serving Classify signatures."""

    def __init__(self):
        self.functions, self.warmup, self.classify = {}, {}, set()

    def add(self, name, function, specs, warmup):
        self.functions[name] = (function, specs)
        self.warmup[name] = warmup


def _warmup_texts(tokenizer, count=2):
    """A short text and one longer than the sequence budget (cut, as served)."""
    words = [t for t in tokenizer.vocabulary if t.isalpha() and t.islower()][:50] or ["warm", "up"]
    long_text = " ".join(words * (tokenizer.sequence_length // len(words) + 2))
    return [" ".join(words[:3]), long_text][:count]


def _token_warmup(tokenizer, texts, pairs=None):
    x = tokenizer(tf.constant(texts), None if pairs is None else tf.constant(pairs))
    return {k: v.numpy() for k, v in x.items()}


def _classifier_signatures(model, tokenizer, labels, text_pair):
    names = tf.constant([str(n) for n in (labels or range(model.num_classes))])
    if names.shape[0] != model.num_classes:
        raise ValueError(f"Expected {model.num_classes} labels, one per class. Received: labels={labels!r}")

    def classify(inputs):
        logits = _float32(model(inputs, training=False))
        probabilities = tf.nn.softmax(logits, axis=-1)
        label_ids = tf.argmax(probabilities, axis=-1)
        return logits, probabilities, label_ids, tf.gather(names, label_ids)

    def from_text(text, pair=None):
        _, probabilities, label_ids, label_names = classify(
            tokenizer(clean_text(text), None if pair is None else clean_text(pair)))
        return {"probabilities": probabilities, "label_ids": label_ids, "labels": label_names}

    def from_examples(inputs):
        features = {"text": tf.io.FixedLenFeature([], tf.string)}
        if text_pair:
            features["text_pair"] = tf.io.FixedLenFeature([], tf.string)
        parsed = tf.io.parse_example(inputs, features)
        probabilities = from_text(parsed["text"], parsed.get("text_pair"))["probabilities"]
        classes = tf.tile(names[None], [tf.shape(probabilities)[0], 1])
        return {"classes": classes, "scores": probabilities}

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        logits, probabilities, _, _ = classify(_token_inputs(token_ids, segment_ids, padding_mask))
        return {"logits": logits, "probabilities": probabilities}

    texts = _warmup_texts(tokenizer)
    pairs = list(reversed(texts)) if text_pair else None
    signatures = _Signatures()
    if text_pair:
        signatures.add("serving_default", lambda text, text_pair: from_text(text, text_pair),
                       [_strings("text"), _strings("text_pair")], {"text": texts, "text_pair": pairs})
    else:
        signatures.add("serving_default", lambda text: from_text(text), [_strings("text")], {"text": texts})
    signatures.add("serve_token_ids", serve_token_ids, [_ids(n) for n in ("token_ids", "segment_ids", "padding_mask")],
                   _token_warmup(tokenizer, texts, pairs))
    examples = [{"text": t, **({"text_pair": p} if text_pair else {})} for t, p in zip(texts, pairs or texts)]
    signatures.add("classify", from_examples, [_strings("inputs")], {"inputs": examples})
    signatures.classify.add("classify")
    return signatures


def _backbone_signatures(model, tokenizer):
    def embed(inputs):
        outputs = model(inputs, training=False)
        sequence = _float32(outputs["sequence_output"])
        mask = _float32(inputs["padding_mask"])[..., None]
        mean = tf.reduce_sum(sequence * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
        return sequence, _float32(outputs["pooled_output"]), tf.math.l2_normalize(mean, axis=-1)

    def serve_text(text):
        _, pooled, embeddings = embed(tokenizer(clean_text(text)))
        return {"embeddings": embeddings, "pooled_output": pooled}

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        sequence, pooled, _ = embed(_token_inputs(token_ids, segment_ids, padding_mask))
        return {"sequence_output": sequence, "pooled_output": pooled}

    texts = _warmup_texts(tokenizer)
    signatures = _Signatures()
    signatures.add("serving_default", serve_text, [_strings("text")], {"text": texts})
    signatures.add("serve_token_ids", serve_token_ids, [_ids(n) for n in ("token_ids", "segment_ids", "padding_mask")],
                   _token_warmup(tokenizer, texts))
    return signatures


def split_words(text):
    """Raw strings -> words `(batch, (words))` and their UTF-8 byte starts and ends."""
    return tf_text.regex_split_with_offsets(text, WORD_DELIMITERS, KEPT_DELIMITERS)


def _tagger_signatures(model, tokenizer, labels):
    names = tf.constant([str(n) for n in (labels or range(model.num_classes))])
    if names.shape[0] != model.num_classes:
        raise ValueError(f"Expected {model.num_classes} labels, one tag name per class. Received: labels={labels!r}")
    num_classes = model.num_classes

    def serve_text(text):
        text = clean_text(text)
        words, starts, ends = split_words(text)
        x = tagging_inputs(tokenizer, words)
        probabilities = tf.nn.softmax(_float32(model({k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")},
                                                     training=False)), axis=-1)
        # The first piece of every word carries the word's tag (as in training).
        word_ids = tf.cast(x["word_ids"], tf.int64)
        previous = tf.pad(word_ids[:, :-1], [[0, 0], [1, 0]], constant_values=-1)
        first = tf.where((word_ids >= 0) & (word_ids != previous))  # (pieces, 2): row, position
        batch = tf.shape(text, out_type=tf.int64)[0]
        max_words = tf.reduce_max(tf.concat([words.row_lengths(), tf.zeros([1], tf.int64)], axis=0))
        target = tf.stack([first[:, 0], tf.gather_nd(word_ids, first)], axis=1)
        word_probabilities = tf.scatter_nd(target, tf.gather_nd(probabilities, first),
                                           tf.stack([batch, max_words, num_classes]))
        scored = tf.scatter_nd(target, tf.ones(tf.shape(first)[:1], tf.int32), tf.stack([batch, max_words])) > 0
        tag_ids = tf.where(scored, tf.argmax(word_probabilities, axis=-1), -1)
        shape = tf.stack([batch, max_words])
        return {
            "words": words.to_tensor(default_value="", shape=shape),
            "word_starts": starts.to_tensor(default_value=-1, shape=shape),
            "word_ends": ends.to_tensor(default_value=-1, shape=shape),
            "tag_ids": tag_ids,
            "tags": tf.where(scored, tf.gather(names, tf.maximum(tag_ids, 0)), ""),
            "scores": tf.reduce_max(word_probabilities, axis=-1),
            "probabilities": word_probabilities,
        }

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        logits = _float32(model(_token_inputs(token_ids, segment_ids, padding_mask), training=False))
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    texts = _warmup_texts(tokenizer)
    signatures = _Signatures()
    signatures.add("serving_default", serve_text, [_strings("text")], {"text": texts})
    signatures.add("serve_token_ids", serve_token_ids, [_ids(n) for n in ("token_ids", "segment_ids", "padding_mask")],
                   _token_warmup(tokenizer, texts))
    return signatures


def _span_qa_signatures(model, tokenizer, max_question_length, max_answer_length):
    def answer(question, context):
        context = clean_text(context)
        x = span_qa_inputs(tokenizer, clean_text(question), context, max_question_length=max_question_length)
        outputs = model({k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}, training=False)
        starts, ends, scores = BertSpanQA.decode_spans(outputs["start_logits"], outputs["end_logits"],
                                                       x["context_mask"], max_answer_length=max_answer_length)
        found = tf.reduce_any(x["context_mask"] > 0, axis=1)
        rows = tf.range(tf.shape(starts)[0])
        start_byte = tf.cast(tf.gather_nd(x["token_starts"], tf.stack([rows, starts], 1)), tf.int64)
        end_byte = tf.cast(tf.gather_nd(x["token_ends"], tf.stack([rows, ends], 1)), tf.int64)
        start_byte, end_byte = tf.where(found, start_byte, -1), tf.where(found, end_byte, -1)
        text = tf.strings.substr(context, tf.maximum(start_byte, 0), tf.maximum(end_byte - start_byte, 0), unit="BYTE")
        return {
            "answer": tf.where(found, text, ""),
            "answer_start": start_byte,
            "answer_end": end_byte,
            "score": tf.where(found, _float32(scores), NO_ANSWER_SCORE),
        }

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        outputs = model(_token_inputs(token_ids, segment_ids, padding_mask), training=False)
        return {"start_logits": _float32(outputs["start_logits"]), "end_logits": _float32(outputs["end_logits"])}

    texts = _warmup_texts(tokenizer)
    questions = ["which one ?"] * len(texts)
    x = span_qa_inputs(tokenizer, tf.constant(questions), tf.constant(texts), max_question_length=max_question_length)
    signatures = _Signatures()
    signatures.add("serving_default", answer, [_strings("question"), _strings("context")],
                   {"question": questions, "context": texts})
    signatures.add("serve_token_ids", serve_token_ids, [_ids(n) for n in ("token_ids", "segment_ids", "padding_mask")],
                   {k: x[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")})
    return signatures


def _multiple_choice_signatures(model, tokenizer):
    def choose(context, choices):
        tf.debugging.assert_equal(tf.shape(choices)[1], model.num_choices, message=(
            f"Expected `choices` of shape (batch, {model.num_choices}): the model scores "
            f"{model.num_choices} choices per context."))
        x = multiple_choice_inputs(tokenizer, clean_text(context), clean_text(choices))
        probabilities = tf.nn.softmax(_float32(model(x, training=False)), axis=-1)
        choice_ids = tf.argmax(probabilities, axis=-1)
        return {"probabilities": probabilities, "choice_ids": choice_ids,
                "answer": tf.gather(choices, choice_ids, batch_dims=1)}

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        logits = _float32(model(_token_inputs(token_ids, segment_ids, padding_mask), training=False))
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    texts = _warmup_texts(tokenizer)
    choices = [[texts[(i + j) % len(texts)] for j in range(model.num_choices)] for i in range(len(texts))]
    x = multiple_choice_inputs(tokenizer, tf.constant(texts), tf.constant(choices))
    signatures = _Signatures()
    signatures.add("serving_default", choose, [_strings("context"), tf.TensorSpec([None, None], tf.string, "choices")],
                   {"context": texts, "choices": choices})
    signatures.add("serve_token_ids", serve_token_ids,
                   [_ids(n, rank=3) for n in ("token_ids", "segment_ids", "padding_mask")],
                   {k: v.numpy() for k, v in x.items()})
    return signatures


def _generation_signatures(model, tokenizer, target_tokenizer, max_length, strategy, num_beams, length_penalty):
    """Greedy or beam-search decoding in the graph (no XLA), raw text in and out."""
    if strategy not in ("greedy", "beam"):
        raise ValueError(f"Expected `strategy` 'greedy' or 'beam' (sampling is not exported). "
                         f"Received: strategy={strategy!r}")
    check_generation_arguments(strategy, num_beams, 1.0, None, None, length_penalty)
    max_length = model.max_sequence_length if max_length is None else max_length
    if isinstance(max_length, bool) or not isinstance(max_length, int) or not 1 < max_length <= model.max_sequence_length:
        raise ValueError(f"Expected `max_length` in [2, {model.max_sequence_length}] (the model's positions). "
                         f"Received: max_length={max_length!r}")
    seq2seq = isinstance(model, TransformerSeq2Seq)
    output_tokenizer = target_tokenizer if seq2seq else tokenizer
    if seq2seq and target_tokenizer is None:
        raise ValueError("Expected `target_tokenizer` for a TransformerSeq2Seq (its decoder's vocabulary).")
    end_token_id = output_tokenizer.sep_id if seq2seq else None
    # Greedy decoding is beam search with one beam (keras-hub's samplers write with
    # XLA's dynamic-update-slice, which TF Serving does not link; ours avoid it in
    # `core_tensorflow_ops_only`). No XLA: the exported graph must run anywhere.
    settings = ("beam", num_beams if strategy == "beam" else 1, float(length_penalty), end_token_id, 1.0,
                None, None, True, False)
    decode, _ = model._generation_function(settings, cached=False)
    pad = model.pad_token_id

    def generate_ids(token_ids, lengths):
        """`(batch, width)` right-padded ids of the prompt (LM) or the source (seq2seq)."""
        batch = tf.shape(token_ids)[0]
        if seq2seq:
            source = token_ids[:, :model.max_sequence_length]
            prompt = tf.concat([tf.fill([batch, 1], output_tokenizer.cls_id),
                                tf.fill([batch, max_length - 1], pad)], axis=1)
            prompt_lengths = tf.ones([batch], tf.int32)
            tokens, _ = decode(tf.ensure_shape(prompt, [None, max_length]), prompt_lengths, source)
        else:
            # The last max_length - 1 tokens of each prompt; [SEP] (a sentence start) for an empty one.
            ragged = tf.RaggedTensor.from_tensor(token_ids, lengths=tf.cast(lengths, tf.int64))
            empty = tf.equal(ragged.row_lengths(), 0)
            separator = tf.ragged.boolean_mask(tf.fill([batch, 1], output_tokenizer.sep_id), empty[:, None])
            ragged = tf.concat([separator, ragged], axis=1)
            row_lengths = tf.cast(ragged.row_lengths(), tf.int32)
            keep_from = tf.maximum(row_lengths - (max_length - 1), 0)
            ragged = tf.ragged.boolean_mask(ragged, tf.ragged.range(row_lengths) >= keep_from[:, None])
            prompt = ragged.to_tensor(default_value=pad, shape=[None, max_length])
            tokens, _ = decode(tf.ensure_shape(prompt, [None, max_length]),
                               tf.cast(ragged.row_lengths(), tf.int32))
        return tokens

    def from_text(text):
        pieces = tokenizer.tokenize(clean_text(text))
        ids = pieces.to_tensor(default_value=pad)
        tokens = generate_ids(ids, tf.cast(pieces.row_lengths(), tf.int32))
        return {"text": output_tokenizer.detokenize_to_tensor(tokens), "token_ids": tokens}

    def serve_token_ids(token_ids, padding_mask):
        lengths = tf.reduce_sum(tf.cast(padding_mask > 0, tf.int32), axis=1)
        return {"token_ids": generate_ids(token_ids, lengths)}

    name = "source" if seq2seq else "prompt"
    texts = [" ".join(t for t in tokenizer.vocabulary[:60] if t.isalpha())[:40] or "warm up", ""]
    x = tokenizer.tokenize(tf.constant(texts[:1]))
    signatures = _Signatures()
    signatures.add("serving_default", from_text, [_strings(name)], {name: texts})
    signatures.add("serve_token_ids", serve_token_ids, [_ids("token_ids"), _ids("padding_mask")],
                   {"token_ids": x.to_tensor().numpy(), "padding_mask": np.ones(x.to_tensor().shape, "int32")})
    return signatures


def _add_attention_signature(signatures, backbone, tokenizer, pair):
    """`attention`: raw text -> every layer's self-attention, for pictures
    (`keras-attn attention`). Pairs are packed `[CLS] A [SEP] B [SEP]` by the
    tokenizer (round-robin trimming), the same for every pair model."""
    vocabulary = tf.constant(tokenizer.vocabulary)

    def attention(text, text_pair=None):
        x = tokenizer(clean_text(text), None if text_pair is None else clean_text(text_pair))
        lengths = tf.reduce_sum(tf.cast(x["padding_mask"], tf.int32), axis=1)
        n = tf.reduce_max(tf.concat([lengths, tf.zeros([1], tf.int32)], axis=0))
        x = {k: v[:, :n] for k, v in x.items()}
        maps = tf.stack([_float32(m) for m in backbone.attention_maps(x)], axis=1)  # (batch, layers, heads, n, n)
        real = x["padding_mask"] > 0
        return {"attention": maps * _float32(real)[:, None, None, :, None],
                "tokens": tf.where(real, tf.gather(vocabulary, x["token_ids"]), ""), "lengths": lengths}

    texts = _warmup_texts(tokenizer)
    if pair:
        signatures.add("attention", lambda text, text_pair: attention(text, text_pair),
                       [_strings("text"), _strings("text_pair")], {"text": texts, "text_pair": list(reversed(texts))})
    else:
        signatures.add("attention", lambda text: attention(text), [_strings("text")], {"text": texts})
    return signatures


def model_signatures(model, tokenizer, labels=None, text_pair=False, max_question_length=64,
                     max_answer_length=30, target_tokenizer=None, max_length=None, strategy="greedy",
                     num_beams=4, length_penalty=0.0):
    """The signatures `export_saved_model` writes for `model` (see there)."""
    if isinstance(model, (GPTLanguageModel, TransformerSeq2Seq)):
        if labels is not None or text_pair:
            raise ValueError(f"`labels` and `text_pair` are for classifiers. Received: {type(model).__name__}")
        return _generation_signatures(model, tokenizer, target_tokenizer, max_length, strategy, num_beams,
                                      length_penalty)
    if target_tokenizer is not None:
        raise ValueError(f"`target_tokenizer` is for a TransformerSeq2Seq. Received: {type(model).__name__}")
    if isinstance(model, BertClassifier):
        signatures = _classifier_signatures(model, tokenizer, labels, text_pair)
        return _add_attention_signature(signatures, model.backbone, tokenizer, pair=text_pair)
    if text_pair:
        raise ValueError(f"`text_pair=True` is for a BertClassifier. Received: {type(model).__name__}")
    if isinstance(model, BertTokenClassifier):
        signatures = _tagger_signatures(model, tokenizer, labels)
        return _add_attention_signature(signatures, model.backbone, tokenizer, pair=False)
    if labels is not None:
        raise ValueError(f"`labels` are for a BertClassifier or BertTokenClassifier. Received: {type(model).__name__}")
    if isinstance(model, BertSpanQA):
        signatures = _span_qa_signatures(model, tokenizer, max_question_length, max_answer_length)
        return _add_attention_signature(signatures, model.backbone, tokenizer, pair=True)
    if isinstance(model, BertMultipleChoice):
        signatures = _multiple_choice_signatures(model, tokenizer)
        return _add_attention_signature(signatures, model.backbone, tokenizer, pair=True)
    if isinstance(model, BertBackbone):
        return _add_attention_signature(_backbone_signatures(model, tokenizer), model, tokenizer, pair=False)
    raise TypeError(
        "Expected a BertClassifier, BertTokenClassifier, BertSpanQA, BertMultipleChoice, BertBackbone, "
        "GPTLanguageModel or TransformerSeq2Seq. "
        f"Received: {type(model).__name__}"
    )


@keras_attn_export("keras_attn.export.export_saved_model")
def export_saved_model(model, tokenizer, path, labels=None, text_pair=False, max_question_length=64,
                       max_answer_length=30, target_tokenizer=None, max_length=None, strategy="greedy",
                       num_beams=4, length_penalty=0.0, warmup=True, check=False):
    """Writes `model` with `tokenizer` as a SavedModel for TF Serving (tag `serve`).

    Every model gets `serving_default` (raw strings in, the tokenizer in the graph)
    and `serve_token_ids` (`token_ids`, `segment_ids`, `padding_mask` int32
    `(batch, length)`, or `(batch, choices, length)` for multiple choice). Outputs
    are float32 unless said:

    | model | `serving_default` inputs -> outputs | `serve_token_ids` outputs |
    | --- | --- | --- |
    | `BertClassifier` | `text` (and `text_pair`) -> `probabilities` `(batch, classes)`, `label_ids` int64, `labels` string | `logits`, `probabilities` |
    | `BertTokenClassifier` | `text` -> per word `(batch, words)`: `words` string, `word_starts` / `word_ends` int64 UTF-8 byte offsets, `tag_ids` int64, `tags` string, `scores`; `probabilities` `(batch, words, tags)` | `logits`, `probabilities` `(batch, length, tags)` |
    | `BertSpanQA` | `question`, `context` -> `answer` string, `answer_start` / `answer_end` int64 byte offsets in the context, `score` | `start_logits`, `end_logits` |
    | `BertMultipleChoice` | `context` `(batch,)`, `choices` `(batch, choices)` -> `probabilities`, `choice_ids` int64, `answer` string | `logits`, `probabilities` |
    | `BertBackbone` | `text` -> `embeddings` (mean of token vectors, L2-normalised), `pooled_output` | `sequence_output`, `pooled_output` |
    | `GPTLanguageModel` | `prompt` -> `text` (prompt and continuation, detokenized), `token_ids` `(batch, max_length)` int32 | `token_ids` |
    | `TransformerSeq2Seq` | `source` -> `text` (the decoded target), `token_ids` int32 | `token_ids` |

    The generation models' `serve_token_ids` takes `token_ids` and `padding_mask`
    (the prompt or the source, right-padded) and decodes greedily or by beam search
    (`strategy`), without XLA; the language model continues the last
    `max_length - 1` tokens of a prompt (an empty prompt starts from `[SEP]`), the
    seq2seq model decodes from the target's `[CLS]` until its `[SEP]`.

    The BERT models also get `attention`: `text` (and `text_pair` for the pair
    classifier, span QA and multiple choice) -> `attention` float32
    `(batch, layers, heads, length, length)` (every layer's self-attention
    probabilities, zero rows at padding), `tokens` string `(batch, length)` (`""`
    at padding) and `lengths` int32, with `length` the longest text's pieces;
    `keras-attn attention` draws it.

    A classifier also gets `classify`, in TF Serving's Classify form (method
    `tensorflow/serving/classify`): `inputs`, serialized `tf.Example`s with a bytes
    feature `text` (and `text_pair`), -> `classes` `(batch, classes)` string and
    `scores` `(batch, classes)`.

    Raw text: invalid UTF-8 bytes become U+FFFD; pieces beyond `sequence_length`
    are cut (round-robin between a pair; the context of span QA after the question's
    `max_question_length` pieces); words whose pieces were cut get tag id -1 and tag
    `""`; `""` pads `words` and -1 the offsets; a context with no piece left gets
    answer `""`, offsets -1 and score -1e9. An empty batch gives empty outputs.

    `assets/vocab.txt` holds the vocabulary and, with `warmup=True`,
    `assets.extra/tf_serving_warmup_requests` one `PredictionLog` per signature
    (TF Serving replays them when it loads the model).

    The version appears whole or not at all: everything is written into a staging
    folder beside the versions (a name TF Serving ignores), checked if asked, then
    renamed to its number (see `keras_attn.export.versions`). Given a model folder,
    the next free number is claimed at that rename, so concurrent exports of one
    model get different versions.

    Args:
        model: one of the models above.
        tokenizer: the `WordPieceTokenizer` it was trained with.
        path: the version folder to write, `<base>/<name>/<version>` (must not
            exist), or the model folder `<base>/<name>`: the next free version.
        labels: class or tag names in id order (default `"0"`, `"1"`, ...).
        text_pair: the classifier takes sentence pairs.
        max_question_length: span QA: question pieces kept, as in training.
        max_answer_length: span QA: the longest answer, in pieces.
        target_tokenizer: seq2seq: the target side's `WordPieceTokenizer`
            (`tokenizer` is the source side's).
        max_length: generation: the length of the returned rows (default: the
            model's `max_sequence_length`).
        strategy: generation: `"greedy"` or `"beam"`.
        num_beams: beam search's beams.
        length_penalty: beam search's GNMT alpha.
        warmup: write the warm-up records.
        check: before publishing, check the export as TF Serving's loader would
            (`check_saved_model`) and replay its warm-up records; a failure
            publishes nothing.

    Returns:
        The version folder written, a `pathlib.Path`.

    Example:

    >>> import tempfile, pathlib, tensorflow as tf
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import export_saved_model
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "."]
    >>> model = BertClassifier(BertBackbone.from_preset("tiny", vocabulary_size=8), num_classes=2)
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "sentiment" / "1"
    >>> _ = export_saved_model(model, WordPieceTokenizer(vocab, sequence_length=16), path, labels=["neg", "pos"])
    >>> loaded = tf.saved_model.load(str(path))
    >>> sorted(loaded.signatures)
    ['attention', 'classify', 'serve_token_ids', 'serving_default']
    >>> sorted(loaded.signatures["serving_default"](text=tf.constant(["good ."])))
    ['label_ids', 'labels', 'probabilities']
    """
    model_dir, version = split_target(path)
    signatures = model_signatures(model, tokenizer, labels, text_pair, max_question_length, max_answer_length,
                                  target_tokenizer, max_length, strategy, num_beams, length_penalty)
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(tokenizer)
    if target_tokenizer is not None:
        archive.track(target_tokenizer)
    with staging_folder(model_dir) as staged:
        with core_tensorflow_ops_only():
            for name, (function, specs) in signatures.functions.items():
                archive.add_endpoint(name, function, input_signature=specs)
            archive.write_out(str(staged), verbose=False)
        if signatures.classify:
            _set_method_names(staged, {name: CLASSIFY_METHOD for name in signatures.classify})
        # The graph holds the vocabulary as a constant of the tokenizer op; the file is
        # for people and clients that tokenise themselves (`serve_token_ids`).
        (staged / "assets").mkdir(exist_ok=True)
        (staged / "assets" / "vocab.txt").write_text("\n".join(tokenizer.vocabulary) + "\n", encoding="utf-8")
        if warmup:
            write_warmup_requests(staged, signatures.warmup, model_name=model_dir.name,
                                  classify=signatures.classify)
        if check:
            from keras_attn.export.checks import check_saved_model, replay_warmup_requests

            check_saved_model(staged)
            if warmup:
                replay_warmup_requests(staged)
        return publish(staged, model_dir, version)


def _set_method_names(path, methods):
    """Sets signatures' `method_name` (TF2's saver always writes Predict's).

    TF Serving's Classify API refuses a signature whose method is not
    `tensorflow/serving/classify` (tensorflow#38081: `tf.saved_model.save` cannot
    set it), so the written `saved_model.pb` is edited and its fingerprint redone.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    proto_file = path / "saved_model.pb"
    saved_model = saved_model_pb2.SavedModel.FromString(proto_file.read_bytes())
    for meta_graph in saved_model.meta_graphs:
        for name, method in methods.items():
            meta_graph.signature_def[name].method_name = method
    temporary = proto_file.with_suffix(".pb.tmp")
    temporary.write_bytes(saved_model.SerializeToString(deterministic=True))
    temporary.replace(proto_file)
    try:
        from tensorflow.python.saved_model import fingerprinting_utils
    except ImportError:  # pragma: no cover - the fingerprint is optional to loaders
        (path / "fingerprint.pb").unlink(missing_ok=True)
    else:
        fingerprinting_utils.write_fingerprint(str(path))


def _example(features):
    return tf.train.Example(features=tf.train.Features(feature={
        key: tf.train.Feature(bytes_list=tf.train.BytesList(value=[str(value).encode("utf-8")]))
        for key, value in features.items()
    }))


@keras_attn_export("keras_attn.export.write_warmup_requests")
def write_warmup_requests(path, requests, model_name, classify=()):
    """Writes `assets.extra/tf_serving_warmup_requests`: TF Serving's warm-up records.

    One `PredictionLog` per signature, a TFRecord file TF Serving replays when it
    loads the version (a record that fails fails the load).

    Args:
        path: the SavedModel version folder.
        requests: `{signature name: {input name: array-like}}`; a Classify
            signature's value is `{"inputs": [feature dicts]}` (tf.Example features).
        model_name: the `model_spec.name` of the requests.
        classify: the names of Classify signatures.

    Returns:
        The records file, a `pathlib.Path`.

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.export import write_warmup_requests
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> write_warmup_requests(folder, {"serving_default": {"text": ["hello"]}}, "m").name
    'tf_serving_warmup_requests'
    """
    from tensorflow_serving.apis import (classification_pb2, input_pb2, model_pb2, predict_pb2,
                                         prediction_log_pb2)

    records = []
    for name, inputs in requests.items():
        spec = model_pb2.ModelSpec(name=model_name, signature_name=name)
        if name in classify:
            request = classification_pb2.ClassificationRequest(
                model_spec=spec,
                input=input_pb2.Input(example_list=input_pb2.ExampleList(
                    examples=[_example(features) for features in inputs["inputs"]])),
            )
            records.append(prediction_log_pb2.PredictionLog(
                classify_log=prediction_log_pb2.ClassifyLog(request=request)))
        else:
            request = predict_pb2.PredictRequest(model_spec=spec)
            for key, value in inputs.items():
                value = np.asarray(value)
                dtype = tf.string if value.dtype.kind in "USO" else tf.as_dtype(value.dtype)
                request.inputs[key].CopyFrom(tf.make_tensor_proto(value, dtype=dtype))
            records.append(prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)))
    folder = pathlib.Path(path) / "assets.extra"
    folder.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(folder / WARMUP_FILE)) as writer:
        for record in records:
            writer.write(record.SerializeToString())
    return folder / WARMUP_FILE
