"""SavedModels that take raw text: tokenizer, packer and model in one graph.

Built on `keras.export.ExportArchive`. Which signatures a model gets is its family's
entry in `keras_attn.export.signatures`; every signature has named inputs and outputs
and `None` batch (and sequence) dimensions; outputs are float32 (or int64 / string)
whatever precision the model trained in, since TF Serving's REST layer rejects half
precision. Texts are cleaned before tokenising (invalid UTF-8 bytes become U+FFFD)
and cut to the tokenizer's `sequence_length` pieces (round-robin between the two
texts of a pair), as in training. The version folder appears whole or not at all
(`keras_attn.export.versions`).
"""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.data.wordpiece_tokenizer import write_vocabulary
from keras_attn.export.method_names import CLASSIFY_METHOD, set_method_names
from keras_attn.export.quantization import (
    embeddings_only,
    int8_products_for,
    precision_copy,
    quantized_copy,
)
from keras_attn.export.serving_plan import serving_copy
from keras_attn.export.signatures import model_signatures
from keras_attn.export.signatures.signature_kinds import check_exportable
from keras_attn.export.versions import publish, split_target, staging_folder
from keras_attn.export.warmup import write_warmup_requests
from keras_attn.models.lora import merged_for_export


def _trace_endpoints_once(archive):
    """Makes `archive.write_out` trace each endpoint once instead of twice.

    TensorFlow keys its trace cache on whether it is inside a SavedModel save (the
    save options' variable policy is part of the key). `write_out` first traces every
    endpoint outside the save, to list the variables it uses, and `tf.saved_model.save`
    then traces each again inside it: for MiniLM's classifier that second pass took 6
    of the export's 32 s. Listing the variables inside a save context with the options
    the save uses lets the save find those traces. This reaches into a private step of
    Keras's archive and a private TensorFlow module; where either is missing the archive
    is left as it is (tested by counting traces, `tests/export/test_saved_model.py`).
    """
    import tensorflow as tf

    try:
        from tensorflow.python.saved_model import save_context
    except ImportError:
        return
    list_variables = getattr(archive, "_filter_and_track_resources", None)
    if list_variables is None:
        return

    def in_save_context():
        if save_context.in_save_context():
            return list_variables()
        with save_context.save_context(tf.saved_model.SaveOptions()):
            return list_variables()

    archive._filter_and_track_resources = in_save_context


@keras_attn_export("keras_attn.export.export_saved_model")
def export_saved_model(
    model,
    tokenizer,
    path,
    *,
    warmup=True,
    check=False,
    quantize=None,
    precision=None,
    **options,
):
    """Writes `model` with `tokenizer` as a SavedModel for TF Serving (tag `serve`).

    Every model gets `serving_default` (raw strings in, the tokenizer in the graph)
    and `serve_token_ids` (`token_ids`, `segment_ids`, `padding_mask` int32
    `(batch, length)`, or `(batch, choices, length)` for multiple choice). Outputs
    are float32 unless said. Per model, `serving_default`'s inputs -> outputs, then
    `serve_token_ids`'s outputs:

    - `BertClassifier`: `text` (and `text_pair`) -> `probabilities`
      `(batch, classes)`, `label_ids` int64, `labels` string; `logits`,
      `probabilities`.
    - `BertTokenClassifier`: `text` -> per word `(batch, words)`: `words` string,
      `word_starts` / `word_ends` int64 UTF-8 byte offsets, `tag_ids` int64, `tags`
      string, `scores`; `probabilities` `(batch, words, tags)`; `logits`,
      `probabilities` `(batch, length, tags)`.
    - `BertSpanQA`: `question`, `context` -> `answer` string, `answer_start` /
      `answer_end` int64 byte offsets in the context, `score`; `start_logits`,
      `end_logits`.
    - `BertMultipleChoice`: `context` `(batch,)`, `choices` `(batch, choices)` ->
      `probabilities`, `choice_ids` int64, `answer` string; `logits`, `probabilities`.
    - `EntityTyping`: `text`, `mention_start`, `mention_end` (int32 character
      offsets of the mention) -> `probabilities`, `label_ids` int64 (-1 where no
      piece covers the mention), `labels`; on an `ErnieBackbone` the text is linked
      in the graph (`GraphLinker`; the `entities` option names the synsets of its
      entity ids, and `assets/WORDNET_LICENSE` goes with the table); `logits`,
      `probabilities` from the packed inputs, `entity_ids` and `marker_positions`.
    - `BertBackbone`: `text` -> `embeddings` (mean of token vectors, L2-normalised),
      `pooled_output`; `sequence_output`, `pooled_output`.
    - `GPTLanguageModel`: `prompt` -> `text` (prompt and continuation,
      detokenized), `token_ids` `(batch, max_length)` int32; `token_ids`.
    - `TransformerXL`: as `GPTLanguageModel`, the memory as the cache.
    - `TransformerSeq2Seq`: `source` -> `text` (the decoded target), `token_ids`
      int32; `token_ids`.

    The generation models' `serve_token_ids` takes `token_ids` and `padding_mask`
    (the prompt or the source, right-padded) and decodes greedily or by beam search
    (`generation.strategy`) with the model's portable `decode_function` (core
    TensorFlow ops, no XLA); the language model continues the last `max_length - 1`
    tokens of a prompt (an empty prompt starts from `[SEP]`), the seq2seq model
    decodes from the target's `[CLS]` until its `[SEP]`.

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
        model: one of the models above. With LoRA adapters (`enable_lora`) its
            `merged_copy()` is served: the adapters merged into the kernels.
        tokenizer: the `WordPieceTokenizer` it was trained with (a GPT-2
            `GPTLanguageModel`: its byte-pair tokenizer, `gpt2_tokenizer(folder)`).
        path: the version folder to write, `<base>/<name>/<version>` (must not
            exist), or the model folder `<base>/<name>`: the next free version.
        warmup: write the warm-up records.
        check: before publishing, check the export as TF Serving's loader would
            (`check_saved_model`) and replay its warm-up records; a failure
            publishes nothing.
        quantize: `"int8"` serves int8 weights in the attention's and feed-forward
            nets' projections and the embeddings (`model` is left as it is; outputs
            stay float32): where this TensorFlow runs oneDNN's int8 products
            (`keras_attn.export.onednn_int8`), the projections multiply on them
            and the server's TensorFlow needs oneDNN's kernels, as x86 builds have
            them (one without fails the request, naming the op); elsewhere, and
            with `"int8-portable"`, every dense, attention and embedding layer is
            Keras's int8 (`quantized_copy`), which any TensorFlow serves, slower
            than float32; `"int8-weights"`: those layers' weights in int8, their
            inputs left float (a language model's decoding: a quarter of the
            weights, the float model's tokens far more often than with int8
            inputs). `None` (default): the weights as they are.
        precision: `"bfloat16"` serves the model's weights and products in bfloat16
            (`precision_copy`; outputs stay float32): half the weights' size, and on
            CPUs with AVX-512 BF16 or AMX faster at large batches, slower elsewhere
            (docs/deployment.md has both); `"float32"` serves a model trained in mixed
            precision in float32. Not with `quantize`. `None` (default): the model's
            own precision.
        **options: the model family's own (any other is refused):
            `entities`, `marker` (entity typing: the synsets of the entity ids 1..,
            a list or a file of one per line; the marker token, `"[ENT]"`);
            `labels` (classifier, tagger, typing: class or tag names in id order, default
            `"0"`, `"1"`, ...); `text_pair` (classifier: takes sentence pairs);
            `max_question_length`, `max_answer_length` (span QA: question pieces
            kept as in training, the longest answer in pieces; 64 and 30);
            `generation` (language models, seq2seq: a `GenerationConfig`, greedy or
            beam; its `max_length` defaults to the model's
            `default_generation_length()`: `max_sequence_length`, or for
            `TransformerXL` `segment_length + memory_length`);
            `target_tokenizer` (seq2seq: the target side's `WordPieceTokenizer`).
            `exact_length` (the BERT models, default `True`: a raw-text request is
            padded only to its longest text's pieces, so short texts cost what
            short texts cost; `False` pads every request to the tokenizer's
            `sequence_length`, the fixed-length graph, with the same outputs to
            float rounding).

    Returns:
        The version folder written, a `pathlib.Path`.

    Example:

    >>> import tempfile, pathlib, tensorflow as tf
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import export_saved_model
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "."]
    >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=8), num_classes=2)
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "sentiment" / "1"
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=16)
    >>> _ = export_saved_model(model, tokenizer, path, labels=["neg", "pos"])
    >>> loaded = tf.saved_model.load(str(path))
    >>> sorted(loaded.signatures)
    ['attention', 'classify', 'serve_token_ids', 'serving_default']
    >>> sorted(loaded.signatures["serving_default"](text=tf.constant(["good ."])))
    ['label_ids', 'labels', 'probabilities']
    """
    target = split_target(path)  # a bad target is refused before anything is traced
    check_exportable(model)  # a model without signatures, before it is copied
    if precision is not None and quantize is not None:
        raise ValueError(
            "Expected one of `quantize` and `precision`, not both: int8 products between "
            "bfloat16 layers answered more slowly than the int8 export and kept fewer of "
            "float32's labels (docs/speed.md). Received: "
            f"quantize={quantize!r}, precision={precision!r}"
        )
    given = model
    model = merged_for_export(model)  # LoRA adapters merged: no adapter ops served
    if precision is not None:
        model = precision_copy(model, precision)
    onednn_int8 = int8_products_for(quantize)
    if onednn_int8:
        # The embeddings as Keras's int8 (a gather and a scale), the projections
        # oneDNN's int8 products (`serving_copy`).
        model = quantized_copy(model, "int8", filters=embeddings_only)
    elif quantize is not None:
        model = quantized_copy(model, "int8", weights_only=quantize == "int8-weights")
    # The graph served is a copy's: real rows, fused norms, oneDNN's products.
    model = serving_copy(model, onednn_int8, owned=model is not given)
    return _write(model, tokenizer, target, warmup, check, options)


def _write(model, tokenizer, target, warmup, check, options):
    model_dir, version = target
    signatures = model_signatures(model, tokenizer, **options)
    archive = keras.export.ExportArchive()
    _trace_endpoints_once(archive)
    # The model is not tracked: the endpoints capture every variable they use, and
    # tracking it would trace it once more for Keras's default save signature.
    for tracked in (tokenizer, options.get("target_tokenizer"), *signatures.tracked):
        if tracked is not None:
            if isinstance(tracked, keras.layers.Layer) and not tracked.built:
                tracked.build(None)  # keras-hub's tokenizers hold no weights to build
            archive.track(tracked)
    with staging_folder(model_dir) as staged:
        for name, (function, specs) in signatures.functions.items():
            archive.add_endpoint(name, function, input_signature=specs)
        archive.write_out(str(staged), verbose=False)
        if signatures.classify:
            set_method_names(staged, {name: CLASSIFY_METHOD for name in signatures.classify})
        # The graph holds the vocabulary as a constant of the tokenizer op; the file is
        # for people and clients that tokenise themselves (`serve_token_ids`).
        (staged / "assets").mkdir(exist_ok=True)
        if hasattr(tokenizer, "save_assets"):  # keras-hub's byte-pair: vocab.json, merges.txt
            tokenizer.save_assets(str(staged / "assets"))
        else:
            write_vocabulary(tokenizer.vocabulary, staged / "assets" / "vocab.txt")
        for name, text in signatures.assets.items():
            (staged / "assets" / name).write_text(text, encoding="utf-8")
        if warmup:
            write_warmup_requests(
                staged, signatures.warmup, model_name=model_dir.name, classify=signatures.classify
            )
        if check:
            from keras_attn.export.checks import check_saved_model, replay_warmup_requests

            check_saved_model(staged)
            if warmup:
                replay_warmup_requests(staged)
        return publish(staged, model_dir, version)
