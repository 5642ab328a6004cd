"""What every model family's signatures share: input specs, text cleaning, warm-up inputs."""

import tensorflow as tf

from keras_attn.models import registry


class Signatures:
    """The signatures of one model: `{name: (function, input specs)}`, the warm-up
    inputs of each, which ones are TF Serving Classify signatures, the `tf.Module`s
    beside the tokenizer their graphs read (`tracked`: a linker's table) and extra
    `assets` (`{file name: text}`: a licence that goes with derived data)."""

    def __init__(self):
        self.functions, self.warmup, self.classify = {}, {}, set()
        self.tracked, self.assets = [], {}

    def add(self, name, function, specs, warmup):
        self.functions[name] = (function, specs)
        self.warmup[name] = warmup


def strings(name):
    """A `(batch,)` string input named `name`."""
    return tf.TensorSpec([None], tf.string, name=name)


def ids(name, rank=2):
    """An int32 input named `name`, every dimension `None`."""
    return tf.TensorSpec([None] * rank, tf.int32, name=name)


def token_id_specs():
    """`token_ids`, `segment_ids`, `padding_mask`: the BERT models' `serve_token_ids` inputs."""
    return [ids(name) for name in ("token_ids", "segment_ids", "padding_mask")]


def clean_text(text):
    """Strings with invalid UTF-8 made valid (bad bytes -> U+FFFD), in the graph."""
    return tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )


def to_longest(inputs, exact_length=True):
    """Cuts every `(..., length)` tensor of a packed batch to its longest text's pieces.

    The tokenizer pads to its `sequence_length`; the models mask padding, so the real
    tokens' outputs do not depend on how much padding follows them, and a request of
    short texts then costs what short texts cost. `inputs` is a dict whose values all
    end in the length dimension (`padding_mask` among them, right-padded); with
    `exact_length=False` it is returned as it is (the fixed-length graph)."""
    if not exact_length:
        return inputs
    lengths = tf.reduce_sum(tf.cast(inputs["padding_mask"] > 0, tf.int32), axis=-1)
    # At least one position: an empty batch keeps the shapes every model accepts.
    longest = tf.reduce_max(tf.concat([tf.reshape(lengths, [-1]), tf.ones([1], tf.int32)], 0))
    return {name: value[..., :longest] for name, value in inputs.items()}


def model_inputs(model, inputs):
    """The packed dict as `model` takes it: whole, or the one tensor a model of a single
    input (`GPTFineTuner`'s `token_ids`) is called with."""
    if isinstance(model.input, dict) or len(model.inputs) != 1:
        return inputs
    return inputs[model.inputs[0].name]


def float32(x):
    return tf.cast(x, tf.float32)


def token_inputs(token_ids, segment_ids, padding_mask):
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def warmup_texts(tokenizer, count=2):
    """A short text and one longer than the sequence budget (cut, as served)."""
    words = [t for t in tokenizer.vocabulary if t.isalpha() and t.islower()][:50] or ["warm", "up"]
    long_text = " ".join(words * (tokenizer.sequence_length // len(words) + 2))
    return [" ".join(words[:3]), long_text][:count]


def token_warmup(tokenizer, texts, pairs=None):
    """The tokenizer's `serve_token_ids` inputs for `texts` (and `pairs`), as NumPy."""
    x = tokenizer(tf.constant(texts), None if pairs is None else tf.constant(pairs))
    return {k: v.numpy() for k, v in x.items()}


def label_names(labels, num_classes, what="labels"):
    """A string constant of `num_classes` names (default "0", "1", ...)."""
    names = tf.constant([str(n) for n in (labels or range(num_classes))])
    if names.shape[0] != num_classes:
        raise ValueError(
            f"Expected {num_classes} {what}, one per class. Received: labels={labels!r}"
        )
    return names


def single_text_signatures(serve_text, serve_token_ids, tokenizer, backbone):
    """A single-text BERT model's signatures: `serving_default` (`serve_text` on raw
    `text`), `serve_token_ids` (BERT's three id inputs) and `attention`."""
    texts = warmup_texts(tokenizer)
    signatures = Signatures()
    signatures.add("serving_default", serve_text, [strings("text")], {"text": texts})
    signatures.add(
        "serve_token_ids", serve_token_ids, token_id_specs(), token_warmup(tokenizer, texts)
    )
    return add_attention_signature(signatures, backbone, tokenizer, pair=False)


def add_attention_signature(signatures, backbone, tokenizer, pair):
    """`attention`: raw text -> every layer's self-attention, for pictures
    (`keras-attn attention`). Pairs are packed `[CLS] A [SEP] B [SEP]` by the
    tokenizer (round-robin trimming), the same for every pair model. A backbone whose
    family draws no `attention_maps` (XLNet's) gets none."""
    family = registry.family_of(backbone)
    if family is None or not family.attention_maps:
        return signatures
    vocabulary = tf.constant(tokenizer.vocabulary)

    def attention(text, text_pair=None):
        x = to_longest(
            tokenizer(clean_text(text), None if text_pair is None else clean_text(text_pair))
        )
        lengths = tf.reduce_sum(x["padding_mask"], axis=1)
        maps = tf.stack(
            [float32(m) for m in backbone.attention_maps(x)], axis=1
        )  # (batch, layers, heads, n, n)
        real = x["padding_mask"] > 0
        return {
            "attention": maps * float32(real)[:, None, None, :, None],
            "tokens": tf.where(real, tf.gather(vocabulary, x["token_ids"]), ""),
            "lengths": lengths,
        }

    texts = warmup_texts(tokenizer)
    if pair:
        signatures.add(
            "attention",
            lambda text, text_pair: attention(text, text_pair),
            [strings("text"), strings("text_pair")],
            {"text": texts, "text_pair": list(reversed(texts))},
        )
    else:
        signatures.add(
            "attention", lambda text: attention(text), [strings("text")], {"text": texts}
        )
    return signatures
