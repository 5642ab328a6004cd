"""SavedModels: every signature of every task model equals the in-memory model, loaded
by TensorFlow alone (no keras, no keras_attn in the process)."""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import (
    WordPieceTokenizer,
    multiple_choice_inputs,
    span_qa_inputs,
    tagging_inputs,
)
from keras_attn.export import export_saved_model, load_saved_model, next_version_dir
from keras_attn.models import (
    BertBackbone,
    BertClassifier,
    BertMultipleChoice,
    BertSpanQA,
    BertTokenClassifier,
)
from tests.helpers import TF_SERVING_PREAMBLE, script_answer, serving_session

VOCABULARY = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "good",
    "bad",
    "film",
    "plot",
    "the",
    ".",
    "new",
    "york",
    "##er",
    "who",
    "sang",
    "ann",
    "?",
    ",",
]
TEXTS = ["the film was good .", "bad plot", "", "good " * 50]
INPUTS = ("token_ids", "segment_ids", "padding_mask")

# Runs in a process where keras and keras_attn cannot be imported: what TF Serving has.
TF_ONLY = (
    TF_SERVING_PREAMBLE
    + """
import numpy as np
path, inputs = sys.argv[1], json.loads(sys.argv[2])
outputs = {}
loaded = tf.saved_model.load(path)
def leaf(value):
    while isinstance(value, list):
        value = value[0]
    return value
def example(features):  # a Classify request's tf.Example
    return tf.train.Example(features=tf.train.Features(feature={
        k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode()]))
        for k, v in features.items()
    })).SerializeToString()
for name, kwargs in inputs.items():
    signature = loaded.signatures[name]
    tensors = {k: tf.constant([example(e) for e in v["examples"]]) if isinstance(v, dict) else
               tf.constant(v, tf.string if isinstance(leaf(v), str) else tf.int32)
               for k, v in kwargs.items()}
    outputs[name] = {k: (np.char.decode(v.numpy().astype(bytes), "utf-8") if v.dtype == tf.string
                         else v.numpy()).tolist()
                     for k, v in signature(**tensors).items()}
print(json.dumps(outputs))
"""
)


def tf_only(path, inputs):
    return script_answer(TF_ONLY, path, json.dumps(inputs))


def tokenizer():
    return WordPieceTokenizer(VOCABULARY, sequence_length=16)


def backbone():
    return BertBackbone.from_size("tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=16)


def numpy_inputs(x):
    return {k: np.asarray(x[k]) for k in INPUTS}


def softmax(x):
    x = np.exp(x - x.max(-1, keepdims=True))
    return x / x.sum(-1, keepdims=True)


@pytest.mark.parametrize("text_pair", [False, True])
@pytest.mark.slow
def test_classifier_signatures_match_the_model_without_keras(tmp_path, text_pair):
    model = BertClassifier(backbone(), num_classes=3)
    path = export_saved_model(
        model,
        tokenizer(),
        next_version_dir(tmp_path, "clf"),
        labels=["a", "b", "c"],
        text_pair=text_pair,
    )
    assert (
        path == tmp_path / "clf" / "1"
        and (path / "assets" / "vocab.txt").read_text().split() == VOCABULARY
    )
    pairs = ["good", "bad", "film", "plot plot"] if text_pair else None
    x = numpy_inputs(tokenizer()(tf.constant(TEXTS), None if pairs is None else tf.constant(pairs)))
    expected = softmax(model(x).numpy())
    text_inputs = {"text": TEXTS, **({"text_pair": pairs} if pairs else {})}
    examples = [{key: values[i] for key, values in text_inputs.items()} for i in range(len(TEXTS))]
    served = tf_only(
        path,
        {
            "serving_default": text_inputs,
            "serve_token_ids": {k: v.tolist() for k, v in x.items()},
            "classify": {"inputs": {"examples": examples}},
        },
    )
    np.testing.assert_allclose(served["serving_default"]["probabilities"], expected, atol=1e-5)
    np.testing.assert_allclose(served["serve_token_ids"]["probabilities"], expected, atol=1e-5)
    np.testing.assert_allclose(served["serve_token_ids"]["logits"], model(x).numpy(), atol=1e-5)
    assert served["serving_default"]["labels"] == [["a", "b", "c"][i] for i in expected.argmax(-1)]
    assert served["serving_default"]["label_ids"] == expected.argmax(-1).tolist()
    # TF Serving's Classify form: serialized tf.Examples in, classes and scores out.
    np.testing.assert_allclose(served["classify"]["scores"], expected, atol=1e-5)
    assert served["classify"]["classes"] == [["a", "b", "c"]] * len(TEXTS)


@pytest.mark.slow
def test_tagger_serves_tags_per_word(tmp_path):
    model = BertTokenClassifier(backbone(), num_classes=3)
    path = export_saved_model(
        model, tokenizer(), tmp_path / "ner" / "1", labels=["O", "B-LOC", "I-LOC"]
    )
    texts = ["New Yorker, Ann sang.", "", "good " * 30]
    # In memory: the words BERT's basic tokenizer would give, the first piece of each scored.
    words = [["New", "Yorker", ",", "Ann", "sang", "."], [], ["good"] * 30]
    x = tagging_inputs(tokenizer(), tf.ragged.constant(words, tf.string))
    probabilities = softmax(model(numpy_inputs(x)).numpy())
    both = tf_only(
        path,
        {
            "serving_default": {"text": texts},
            "serve_token_ids": {k: v.tolist() for k, v in numpy_inputs(x).items()},
        },
    )
    real = numpy_inputs(x)["padding_mask"].astype(bool)  # padding positions: no tags
    np.testing.assert_allclose(
        np.asarray(both["serve_token_ids"]["probabilities"])[real], probabilities[real], atol=1e-5
    )
    served = both["serving_default"]
    word_ids = x["word_ids"].numpy()
    assert served["words"][0][:6] == words[0] and served["words"][1] == [""] * 30
    assert served["word_starts"][0][:6] == [0, 4, 10, 12, 16, 20] and served["word_ends"][0][
        :2
    ] == [3, 10]
    for row, row_words in enumerate(words):
        for word in range(len(row_words)):
            pieces = np.flatnonzero(word_ids[row] == word)
            if len(pieces) == 0:  # cut by the sequence length: no tag
                assert served["tag_ids"][row][word] == -1 and served["tags"][row][word] == ""
                continue
            expected = probabilities[row, pieces[0]]
            np.testing.assert_allclose(served["probabilities"][row][word], expected, atol=1e-5)
            assert served["tag_ids"][row][word] == expected.argmax()
            assert served["tags"][row][word] == ["O", "B-LOC", "I-LOC"][expected.argmax()]
            np.testing.assert_allclose(served["scores"][row][word], expected.max(), atol=1e-5)
    # 14 pieces fit in 16 with [CLS] and [SEP]: words 0-13 are tagged, word 14 on is cut.
    assert served["tag_ids"][2][13] >= 0 and served["tag_ids"][2][14] == -1


@pytest.mark.slow
def test_span_qa_serves_the_answer_text(tmp_path):
    model = BertSpanQA(backbone())
    path = export_saved_model(model, tokenizer(), tmp_path / "qa" / "1", max_answer_length=3)
    questions, contexts = (
        ["who sang?", "who?", "who?"],
        ["Ann sang the good film.", "", "bad plot , new york"],
    )
    x = span_qa_inputs(tokenizer(), tf.constant(questions), tf.constant(contexts))
    outputs = model(numpy_inputs(x))
    both = tf_only(
        path,
        {
            "serving_default": {"question": questions, "context": contexts},
            "serve_token_ids": {k: v.tolist() for k, v in numpy_inputs(x).items()},
        },
    )
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(both["serve_token_ids"][key], outputs[key].numpy(), atol=1e-5)
    served = both["serving_default"]
    starts, ends, scores = BertSpanQA.decode_spans(
        outputs["start_logits"], outputs["end_logits"], x["context_mask"], max_answer_length=3
    )
    for row in (0, 2):
        start_byte = int(x["token_starts"][row, int(starts[row])])
        end_byte = int(x["token_ends"][row, int(ends[row])])
        assert served["answer"][row] == contexts[row].encode()[start_byte:end_byte].decode()
        assert (served["answer_start"][row], served["answer_end"][row]) == (start_byte, end_byte)
        np.testing.assert_allclose(served["score"][row], float(scores[row]), atol=1e-5)
        assert int(ends[row]) - int(starts[row]) < 3
    assert (
        served["answer"][1] == "" and served["answer_start"][1] == -1 and served["score"][1] == -1e9
    )


@pytest.mark.slow
def test_multiple_choice_serves_the_chosen_answer(tmp_path):
    model = BertMultipleChoice(backbone(), num_choices=3)
    path = export_saved_model(model, tokenizer(), tmp_path / "swag" / "1")
    contexts, choices = (
        ["ann sang", "the film"],
        [["good", "bad", "plot ."], ["was good", "was bad", ""]],
    )
    x = numpy_inputs(multiple_choice_inputs(tokenizer(), contexts, choices))
    expected = softmax(model(x).numpy())
    both = tf_only(
        path,
        {
            "serving_default": {"context": contexts, "choices": choices},
            "serve_token_ids": {k: v.tolist() for k, v in x.items()},
        },
    )
    np.testing.assert_allclose(both["serve_token_ids"]["probabilities"], expected, atol=1e-5)
    served = both["serving_default"]
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)
    assert served["choice_ids"] == expected.argmax(-1).tolist()
    assert served["answer"] == [choices[i][j] for i, j in enumerate(expected.argmax(-1))]
    with pytest.raises(tf.errors.InvalidArgumentError, match="choices"):
        tf.saved_model.load(str(path)).signatures["serving_default"](
            context=tf.constant(["a"]), choices=tf.constant([["a", "b"]])
        )


@pytest.mark.slow  # 10-12 s: out of `make test-fast`
def test_backbone_exports_sentence_embeddings(tmp_path):
    model = backbone()
    path = export_saved_model(model, tokenizer(), tmp_path / "emb" / "1")
    x = numpy_inputs(tokenizer()(tf.constant(TEXTS[:2])))
    served = tf_only(
        path,
        {
            "serving_default": {"text": TEXTS[:2]},
            "serve_token_ids": {k: v.tolist() for k, v in x.items()},
        },
    )
    outputs = model(x)
    sequence, mask = outputs["sequence_output"].numpy(), x["padding_mask"][..., None]
    mean = (sequence * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(
        served["serving_default"]["embeddings"],
        mean / np.linalg.norm(mean, axis=-1, keepdims=True),
        atol=1e-5,
    )
    np.testing.assert_allclose(
        served["serving_default"]["pooled_output"], outputs["pooled_output"], atol=1e-5
    )
    # The served graph computes the real tokens alone (`serving_plan.RealRows`): zeros
    # at the padding positions, where the model's own output means nothing either.
    real = x["padding_mask"].astype(bool)
    assert not real.all()
    served_sequence = np.asarray(served["serve_token_ids"]["sequence_output"])
    np.testing.assert_allclose(served_sequence[real], sequence[real], atol=1e-5)
    assert not served_sequence[~real].any()
    np.testing.assert_allclose(
        served["serve_token_ids"]["pooled_output"], outputs["pooled_output"], atol=1e-5
    )


def test_export_traces_each_signature_once_and_stores_each_weight_once(tmp_path, monkeypatch):
    model = BertClassifier(backbone(), num_classes=2)
    traces, call = [], BertClassifier.call

    def counted(self, *args, **kwargs):
        traces.append(1)
        return call(self, *args, **kwargs)

    # On the class: the export traces its serving copy of the model (`serving_copy`).
    monkeypatch.setattr(BertClassifier, "call", counted)
    path = export_saved_model(model, tokenizer(), tmp_path / "once" / "1", warmup=False)
    # serving_default and classify share one function of the text, serve_token_ids calls
    # the classifier too (attention calls the backbone): two traces, not one more for
    # classify, nor one more each inside `tf.saved_model.save`.
    assert len(traces) == 2
    # Keras's `model.export` stores every weight twice (keras#23553); ours once.
    stored = tf.train.list_variables(str(path / "variables" / "variables"))
    assert sum(int(np.prod(shape)) for name, shape in stored if shape) == model.count_params()


@pytest.mark.slow  # 4 s on the 2 busy cores: out of `make test-fast`
def test_mixed_precision_model_serves_float32(tmp_path):
    import keras

    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        model = BertClassifier(backbone(), num_classes=2)
    finally:
        keras.config.set_dtype_policy(policy)
    path = export_saved_model(model, tokenizer(), tmp_path / "half" / "1")
    signatures = tf.saved_model.load(str(path)).signatures
    for name, inputs in (
        ("serving_default", {"text": tf.constant(["good film"])}),
        (
            "serve_token_ids",
            {
                k: tf.constant(v)
                for k, v in numpy_inputs(tokenizer()(tf.constant(["good film"]))).items()
            },
        ),
    ):
        outputs = signatures[name](**inputs)
        assert {v.dtype for v in outputs.values()} <= {tf.float32, tf.int64, tf.string}, name


def test_export_refuses_bad_arguments(tmp_path):
    model = backbone()
    (tmp_path / "m" / "1").mkdir(parents=True)
    with pytest.raises(ValueError, match="exists"):
        export_saved_model(model, tokenizer(), tmp_path / "m" / "1")
    with pytest.raises(ValueError, match="version number of 1 or more"):
        export_saved_model(model, tokenizer(), tmp_path / "m" / "0")
    with pytest.raises(ValueError, match="name"):
        next_version_dir(tmp_path, "../escape")
    with pytest.raises(ValueError, match="labels"):
        export_saved_model(
            BertClassifier(model, 2), tokenizer(), tmp_path / "m" / "2", labels=["only one"]
        )
    with pytest.raises(ValueError, match="text_pair"):
        export_saved_model(model, tokenizer(), tmp_path / "m" / "3", text_pair=True)
    with pytest.raises(TypeError, match="BertClassifier"):
        export_saved_model(object(), tokenizer(), tmp_path / "m" / "4")
    # A model folder (its name not a number): the next free version, claimed at publication;
    # the refused exports above left no staging folder behind.
    assert (
        export_saved_model(model, tokenizer(), tmp_path / "m", warmup=False) == tmp_path / "m" / "2"
    )
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["1", "2"]


GENERATION_VOCABULARY = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "in",
    "the",
    "beginning",
    "god",
    "created",
    "heaven",
    ".",
    ",",
    "and",
    "earth",
]


SMALL_DECODER = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32)
PROMPTS = ["In the beginning", "", "god created the heaven and the earth, and the earth."]


def _prompt_ids(tokenizer, prompt):
    """`prompt` as `generate` continues it alone in memory: its last 9 token ids, [SEP]
    for an empty one (the served graph's own packing)."""
    return (tokenizer.tokenize(tf.constant([prompt])).to_list()[0] or [tokenizer.sep_id])[-9:]


def _served_prompts(path, tokenizer):
    """`serving_default`'s outputs for `PROMPTS` in a TensorFlow-only process, checked
    equal to `serve_token_ids` on the same prompts' ids."""
    ids = tokenizer.tokenize(tf.constant(PROMPTS))
    both = tf_only(
        path,
        {
            "serving_default": {"prompt": PROMPTS},
            "serve_token_ids": {
                "token_ids": ids.to_tensor().numpy().tolist(),
                "padding_mask": tf.ones_like(ids).to_tensor().numpy().tolist(),
            },
        },
    )
    assert both["serve_token_ids"]["token_ids"] == both["serving_default"]["token_ids"]
    return both["serving_default"]


def _assert_serves_as_generated(path, tokenizer, generate):
    """`serving_default`'s token ids for `PROMPTS` (`_served_prompts`) equal, row by row,
    `generate([ids])` on each prompt's ids as `generate` continues it; returns the served
    outputs and each prompt's generation."""
    served = _served_prompts(path, tokenizer)
    generated = []
    for row, prompt in enumerate(PROMPTS):
        expected = generate([_prompt_ids(tokenizer, prompt)])
        assert served["token_ids"][row] == expected[0].tolist(), row
        generated.append(expected)
    return served, generated


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
@pytest.mark.slow
def test_language_model_generates_in_the_graph(tmp_path, strategy):
    from keras_attn.models import GenerationConfig, GPTLanguageModel

    tokenizer = WordPieceTokenizer(GENERATION_VOCABULARY, sequence_length=16)
    model = GPTLanguageModel(
        len(GENERATION_VOCABULARY),
        **SMALL_DECODER,
        max_sequence_length=12,
    )
    path = export_saved_model(
        model,
        tokenizer,
        tmp_path / "lm" / "1",
        generation=GenerationConfig(max_length=10, strategy=strategy, num_beams=3),
    )
    served, generated = _assert_serves_as_generated(
        path,
        tokenizer,
        lambda ids: model.generate(ids, 10, strategy=strategy, num_beams=3, jit_compile=False),
    )
    for row, expected in enumerate(generated):
        assert served["text"][row] == tokenizer.detokenize(expected)[0]
    # Hostile prompts: empty batch, empty strings, invalid UTF-8, a prompt far past the positions.
    signature = tf.saved_model.load(str(path)).signatures["serving_default"]
    assert signature(prompt=tf.zeros([0], tf.string))["token_ids"].shape == (0, 10)
    outputs = signature(prompt=tf.constant([b"", b"\xff god", ("the " * 5000).encode()]))
    assert outputs["token_ids"].shape == (3, 10) and outputs["text"].shape == (3,)


@pytest.mark.slow
def test_language_model_samples_in_the_graph(tmp_path):
    """Sampling exported (`portable_sampling`): core ops only (`check=True`), the step's
    processors in the graph (each drawn token among the 3 likeliest of the model's logits
    at its position), a fixed seed the same tokens for the same request; without a seed
    the same portable loop draws anew each call."""
    from keras_attn.models import GenerationConfig, GPTLanguageModel

    tokenizer = WordPieceTokenizer(GENERATION_VOCABULARY, sequence_length=16)
    model = GPTLanguageModel(len(GENERATION_VOCABULARY), **SMALL_DECODER, max_sequence_length=12)
    settings = dict(max_length=10, strategy="sample", temperature=3.0, top_k=3)
    path = export_saved_model(
        model,
        tokenizer,
        tmp_path / "lm" / "1",
        generation=GenerationConfig(**settings, seed=7),
        check=True,
        warmup=False,
    )
    prompts = PROMPTS * 4
    served = tf.saved_model.load(str(path)).signatures["serving_default"]
    first, again = (served(prompt=tf.constant(prompts))["token_ids"].numpy() for _ in range(2))
    np.testing.assert_array_equal(first, again)
    logits = np.asarray(model(first))  # (rows, 10, vocabulary): position t's from t - 1
    for row, prompt in enumerate(prompts):
        start = len(_prompt_ids(tokenizer, prompt))
        assert first[row, :start].tolist() == _prompt_ids(tokenizer, prompt)
        for t in range(start, 10):
            assert first[row, t] in np.argsort(logits[row, t - 1])[-3:], (row, t)
    # Drawn, not the likeliest: the same prompt in other rows takes other tokens.
    assert any(not np.array_equal(first[i], first[i + 3]) for i in range(len(prompts) - 3))
    decode = model.decode_function(GenerationConfig(**settings), jit_compile=False, portable=True)
    rows = tf.constant(first[:, :3])
    prompt = tf.concat([rows, tf.zeros([len(prompts), 7], tf.int32)], axis=1)
    one, other = (decode(prompt, tf.fill([len(prompts)], 3))[0].numpy() for _ in range(2))
    assert not np.array_equal(one, other) and (one[:, :3] == first[:, :3]).all()


@pytest.mark.slow
def test_transformer_xl_generates_in_the_graph_with_its_memory(tmp_path):
    from keras_attn.models import GenerationConfig, TransformerXL

    tokenizer = WordPieceTokenizer(GENERATION_VOCABULARY, sequence_length=16)
    keras.utils.set_random_seed(0)
    model = TransformerXL(
        len(GENERATION_VOCABULARY),
        **SMALL_DECODER,
        segment_length=4,
        memory_length=4,
    )
    model(np.ones((1, 4), "int32"))
    rng = np.random.default_rng(0)
    for variable in model.weights:  # varied continuations, not one repeated token
        variable.assign(np.asarray(variable) + rng.normal(0, 0.5, variable.shape))
    with pytest.raises(ValueError, match="max_length"):
        export_saved_model(
            model, tokenizer, tmp_path / "bad" / "1", generation=GenerationConfig(max_length=1)
        )
    path = export_saved_model(
        model, tokenizer, tmp_path / "xl" / "1", generation=GenerationConfig(max_length=10)
    )
    served, generated = _assert_serves_as_generated(
        path, tokenizer, lambda ids: model.generate(ids, 10, jit_compile=False)
    )  # a compile per prompt length
    for row, expected in enumerate(generated):
        assert served["text"][row] == tokenizer.detokenize(expected)[0]
    assert len({tuple(row[-4:]) for row in served["token_ids"]}) > 1
    beam = GenerationConfig(strategy="beam", num_beams=3, max_length=10)
    _assert_serves_as_generated(  # beam search in the graph as in generate
        export_saved_model(model, tokenizer, tmp_path / "xl_beam" / "1", generation=beam),
        tokenizer,
        lambda ids: model.generate(ids, config=beam, jit_compile=False),
    )
    # Default length: the context of training (segment + memory); hostile prompts.
    default = export_saved_model(model, tokenizer, tmp_path / "xl_default" / "1", warmup=False)
    signature = tf.saved_model.load(str(default)).signatures["serving_default"]
    assert signature(prompt=tf.zeros([0], tf.string))["token_ids"].shape == (0, 8)
    outputs = signature(prompt=tf.constant([b"", b"\xff god", ("the " * 5000).encode()]))
    assert outputs["token_ids"].shape == (3, 8) and outputs["text"].shape == (3,)


@pytest.mark.slow
def test_seq2seq_translates_in_the_graph_and_exports_from_a_run(tmp_path, capsys):
    import yaml

    from keras_attn.cli import main as cli
    from keras_attn.models import TransformerSeq2Seq

    source, target = (
        WordPieceTokenizer(VOCABULARY, sequence_length=12),
        WordPieceTokenizer(GENERATION_VOCABULARY, sequence_length=12),
    )
    model = TransformerSeq2Seq(
        len(VOCABULARY),
        target_vocabulary_size=len(GENERATION_VOCABULARY),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=12,
    )
    run = tmp_path / "run"
    run.mkdir()
    model.save(run / "model.keras")
    (run / "source_vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    (run / "target_vocab.txt").write_text("\n".join(GENERATION_VOCABULARY) + "\n")
    (run / "config.yaml").write_text(
        yaml.safe_dump({"model": {"max_length": 8}, "data": {"lowercase": True}})
    )
    path = cli.main(
        [
            "export",
            str(run),
            "--name",
            "zh_en",
            "--base",
            str(tmp_path / "saved_models"),
            "--strategy",
            "beam",
            "--num-beams",
            "2",
            "--length-penalty",
            "0.6",
        ]
    )
    sources = ["the film was good .", "bad plot"]
    served = tf_only(path, {"serving_default": {"source": sources}})["serving_default"]
    expected = model.generate(
        source.tokenize(tf.constant(sources)).to_list(),
        8,
        start_token_id=target.cls_id,
        end_token_id=target.sep_id,
        strategy="beam",
        num_beams=2,
        length_penalty=0.6,
        jit_compile=False,
    )
    assert served["token_ids"] == expected.tolist()
    assert served["text"] == target.detokenize(expected)
    capsys.readouterr()
    cli.main(["predict", str(path), "--source", "good film"])
    assert "good film -> " in capsys.readouterr().out


@pytest.mark.slow
def test_load_saved_model_registers_the_tokenizer_ops_and_takes_the_latest_version(tmp_path):
    for classes in (2, 3):  # versions 1 and 2: a 2-class and a 3-class model
        export_saved_model(
            BertClassifier(backbone(), num_classes=classes), tokenizer(), tmp_path / "clf"
        )
    script = (
        "import sys, tensorflow as tf\n"
        "try:\n"
        "    tf.saved_model.load(sys.argv[1] + '/2')\n"
        "except Exception as error:\n"
        "    print('bare load:', type(error).__name__, 'FastBertNormalize' in str(error))\n"
        "from keras_attn.export import load_saved_model\n"
        "for path in (sys.argv[1], sys.argv[1] + '/1'):\n"
        "    signature = load_saved_model(path).signatures['serving_default']\n"
        "    out = signature(text=tf.constant(['good']))\n"
        "    print(out['probabilities'].shape[-1])\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "clf")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    # A bare tf.saved_model.load in a fresh process fails (the ops are not known yet);
    # load_saved_model loads the model folder's highest version, or the version given.
    assert completed.stdout.split("\n")[-4:] == ["bare load: RuntimeError True", "3", "2", ""]
    with pytest.raises(ValueError, match="neither a SavedModel nor a folder"):
        load_saved_model(tmp_path)


def test_to_longest_cuts_a_packed_batch_to_its_longest_text():
    from keras_attn.export.signatures.common import to_longest

    x = tokenizer()(tf.constant(["good film", "the bad plot ."]))
    cut = to_longest(x)
    assert {k: v.shape for k, v in cut.items()} == {k: (2, 6) for k in INPUTS}
    for k in INPUTS:
        np.testing.assert_array_equal(cut[k], x[k][:, :6])
    assert to_longest(x, exact_length=False) is x
    choices = multiple_choice_inputs(tokenizer(), ["ann sang"], [["good", "bad film ."]])
    assert to_longest(choices)["token_ids"].shape == (
        1,
        2,
        8,
    )  # [CLS] ann sang [SEP] bad film . [SEP]
    empty = to_longest(tokenizer()(tf.constant([], tf.string)))
    assert empty["token_ids"].shape == (0, 1)


# Each task's serving_default inputs: a batch of short texts, then one reaching the cut.
# Span QA, multiple choice, the backbone and pair classification are served short requests
# by their own tests above, which compare every output with the model on inputs padded to
# the full length.
EXACT_LENGTH_CASES = {
    "classifier": (
        lambda: BertClassifier(backbone(), num_classes=3),
        {},
        [{"text": ["good film", "bad", ""]}, {"text": TEXTS}],
    ),
    "tagger": (
        lambda: BertTokenClassifier(backbone(), num_classes=3),
        {},
        [{"text": ["New Yorker, Ann sang.", ""]}, {"text": ["Ann", "good " * 30]}],
    ),
}


@pytest.mark.parametrize("task", sorted(EXACT_LENGTH_CASES))
@pytest.mark.slow
def test_exact_length_graph_equals_the_fixed_length_graph(tmp_path, task):
    """Acceptance 2 of issue 23: padding a request only to its longest text changes no
    output (to float rounding) of any task's raw-text signatures."""
    build, options, requests = EXACT_LENGTH_CASES[task]
    model = build()
    loaded = {
        exact: tf.saved_model.load(
            str(
                export_saved_model(
                    model,
                    tokenizer(),
                    tmp_path / str(exact) / "1",
                    warmup=False,
                    exact_length=exact,
                    **options,
                )
            )
        )
        for exact in (True, False)
    }
    for request in requests:
        calls = [("serving_default", {k: tf.constant(v) for k, v in request.items()})]
        if task.endswith("classifier"):  # TF Serving's Classify form: tf.Examples of the texts
            examples = [
                tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            k: tf.train.Feature(
                                bytes_list=tf.train.BytesList(value=[v[i].encode()])
                            )
                            for k, v in request.items()
                        }
                    )
                ).SerializeToString()
                for i in range(len(request["text"]))
            ]
            calls.append(("classify", {"inputs": tf.constant(examples)}))
        for name, inputs in calls:
            exact, fixed = (loaded[e].signatures[name](**inputs) for e in (True, False))
            assert sorted(exact) == sorted(fixed)
            for key in fixed:
                if fixed[key].dtype.is_floating:
                    np.testing.assert_allclose(exact[key], fixed[key], atol=1e-5, err_msg=key)
                else:
                    np.testing.assert_array_equal(exact[key], fixed[key], err_msg=key)


def test_projections_fuse_their_bias_and_heads_transpose_as_integers(tmp_path):
    """TF Serving's way (the MetaGraph in a Session, Grappler at its creation): the four
    attention projections and two feed-forward products of each layer become one fused
    op each with its bias (and, where oneDNN is on, its GELU), as
    `row_products.rows_product` writes them to be; the four heads-first transposes of
    each layer run on the float bits read as integers (`ServingPlan.heads_first`:
    TensorFlow's own kernel, not oneDNN's); the layer norms keep Keras's form in a
    float32 export, which servers without oneDNN run too (`ServingPlan.normalize`:
    tests/export/test_precision.py checks the bfloat16 export's); and the answers are
    the model's, for a request of few rows and one of many."""
    model = BertClassifier(backbone(), num_classes=3)
    path = export_saved_model(model, tokenizer(), next_version_dir(tmp_path, "clf"))
    many = [f"good plot {i} " * 3 for i in range(40)]  # 40 x 11 tokens: over 256 rows
    with serving_session(path) as run:
        served, nodes = run(TEXTS)
        served_many, _ = run(many)
    assert not [n for n in nodes if n.op in ("_MklLayerNorm", "FusedBatchNormV3")]
    x = numpy_inputs(tokenizer()(tf.constant(many)))
    assert x["padding_mask"].sum() >= 256
    np.testing.assert_allclose(served_many, softmax(model(x).numpy()), atol=1e-5)
    fused = [n for n in nodes if "FusedMatMul" in n.op and "transformer_layer" in n.name]
    assert len(fused) == 6 * len(model.backbone.transformer_layers)
    assert all(n.attr["fused_ops"].list.s[0] == b"BiasAdd" for n in fused)
    transposes = [n for n in nodes if n.op.endswith("Transpose") and "transformer_layer" in n.name]
    assert len(transposes) == 4 * len(model.backbone.transformer_layers)
    assert {tf.dtypes.as_dtype(n.attr["T"].type) for n in transposes} == {tf.int32}
    x = numpy_inputs(tokenizer()(tf.constant(TEXTS)))
    np.testing.assert_allclose(served, softmax(model(x).numpy()), atol=1e-5)
