"""What TF Serving does with an export, done here without its server binary:
the C++ loading path through TensorFlow's C API, `saved_model_cli`, the server's
contract (signature keys, ops, dtypes, warm-up records), hostile input and
concurrent calls."""

import concurrent.futures
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli import main as cli
from keras_attn.data import WordPieceTokenizer
from keras_attn.export import (
    check_saved_model,
    export_saved_model,
    graph_ops,
    quantized_copy,
    read_warmup_requests,
    replay_warmup_requests,
    write_warmup_requests,
)
from keras_attn.export.checks import tensorflow_text_op_libraries
from keras_attn.export.quantization import embeddings_only, int8_products_for
from keras_attn.export.serving_plan import serving_copy
from keras_attn.models import BertBackbone, BertClassifier

# One worker runs this module: its module fixtures are made once (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("test_serving_contract")

HERE = pathlib.Path(__file__).parent
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
    "é",
]
LABELS = ["rotten", "fresh"]
TEXTS = ["the film was good .", "bad plot", "Été", ""]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tokenizer = WordPieceTokenizer(VOCABULARY, sequence_length=16)
    model = BertClassifier(
        BertBackbone.from_size("tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=16),
        num_classes=2,
    )
    path = export_saved_model(
        model, tokenizer, tmp_path_factory.mktemp("serving") / "sentiment" / "1", labels=LABELS
    )
    return path, model, tokenizer


@pytest.fixture(scope="module")
def exported_int8(exported, tmp_path_factory):
    """The same model with int8 weights (`quantize="int8"`), next to it: the model in the
    tuple computes what the export serves (oneDNN's int8 products on the copy with int8
    embeddings where this TensorFlow runs them, else Keras's int8 copy)."""
    _, model, tokenizer = exported
    path = export_saved_model(
        model,
        tokenizer,
        tmp_path_factory.mktemp("serving") / "sentiment" / "1",
        labels=LABELS,
        quantize="int8",
        check=True,  # the op allow-list, signatures and dtypes, warm-up replay
    )
    if not int8_products_for("int8"):
        return path, quantized_copy(model), tokenizer
    served_model = serving_copy(quantized_copy(model, filters=embeddings_only), True, owned=True)
    return path, served_model, tokenizer


@pytest.fixture(scope="module")
def serving_default(exported):
    return tf.saved_model.load(str(exported[0])).signatures["serving_default"]


def _signature_tensors(path, name):
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
    signature = saved_model.meta_graphs[0].signature_def[name]
    return (
        {k: v.name for k, v in signature.inputs.items()},
        {k: v.name for k, v in signature.outputs.items()},
    )


@pytest.fixture(scope="module")
def serve_signature_binary(tmp_path_factory):
    """serve_signature.c compiled against the wheel's libtensorflow_cc, once per module."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler on this machine")
    tf_dir = pathlib.Path(tf.__file__).parent
    binary = tmp_path_factory.mktemp("c") / "serve_signature"
    subprocess.run(
        [
            compiler,
            str(HERE / "serve_signature.c"),
            "-o",
            str(binary),
            f"-I{tf_dir / 'include'}",
            f"-L{tf_dir}",
            "-l:libtensorflow_cc.so.2",
            "-l:libtensorflow_framework.so.2",
            f"-Wl,-rpath,{tf_dir}",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return binary


@pytest.mark.parametrize(
    "export", ["exported", pytest.param("exported_int8", marks=pytest.mark.slow)]
)
@pytest.mark.slow  # over 10 s: left out of `make test-fast`
def test_c_api_loads_the_export_like_tf_serving(export, request, serve_signature_binary):
    """TF_LoadSessionFromSavedModel (tag serve) + TF_LoadLibrary of tensorflow-text's ops,
    then serving_default by its signature tensor names: the Python outputs (float32
    weights and int8)."""
    path, model, tokenizer = request.getfixturevalue(export)
    binary = serve_signature_binary
    inputs, outputs = _signature_tensors(path, "serving_default")
    names = ["probabilities", "label_ids", "labels"]
    libraries = tensorflow_text_op_libraries()
    completed = subprocess.run(
        [
            str(binary),
            str(path),
            inputs["text"],
            ",".join(outputs[n] for n in names),
            str(len(libraries)),
            *libraries,
            *TEXTS[:3],
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = dict(zip(names, completed.stdout.strip().splitlines(), strict=True))
    served = {name: line.split()[3:] for name, line in lines.items()}
    assert lines["probabilities"].split()[2] == "3x2"
    expected = tf.nn.softmax(
        model({k: v for k, v in tokenizer(tf.constant(TEXTS[:3])).items()})
    ).numpy()
    np.testing.assert_allclose(
        np.array(served["probabilities"], float).reshape(3, 2), expected, atol=1e-5
    )
    assert served["label_ids"] == [str(i) for i in expected.argmax(-1)]
    assert served["labels"] == [LABELS[i] for i in expected.argmax(-1)]


@pytest.mark.slow
def test_saved_model_cli_show_and_run(exported):
    path = exported[0]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    saved_model_cli = pathlib.Path(sysconfig.get_path("scripts")) / "saved_model_cli"
    show = subprocess.run(
        [str(saved_model_cli), "show", "--dir", str(path), "--all"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert show.returncode == 0, show.stderr[-3000:]
    for text in (
        "signature_def['serving_default']",
        "inputs['text']",
        "outputs['probabilities']",
        "signature_def['classify']",
        "Method name is: tensorflow/serving/classify",
        "FastBertNormalize",
    ):
        assert text in show.stdout, text
    # TF's own `run` has no way to load tensorflow-text's ops; ours loads them first.
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_attn.cli.main",
            "saved-model-cli",
            "run",
            "--dir",
            str(path),
            "--tag_set",
            "serve",
            "--signature_def",
            "serving_default",
            "--input_exprs",
            'text=["good film", "bad plot"]',
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert (
        "Result for output key probabilities" in run.stdout
        and "Result for output key labels" in run.stdout
    )


@pytest.mark.parametrize(
    "export", ["exported", pytest.param("exported_int8", marks=pytest.mark.slow)]
)
def test_graph_ops_are_core_tensorflow_or_tensorflow_text(export, request):
    """Decided in a process with TensorFlow alone: the ops it registers are core, the
    ones loading tensorflow-text's libraries adds are tensorflow-text's (float32 weights
    and int8)."""
    exported = request.getfixturevalue(export)
    path = exported[0]
    script = """
import json, sys
sys.modules["keras"] = None
import tensorflow as tf
from tensorflow.python.framework import op_def_registry
ops = json.loads(sys.argv[1])
core = {op for op in ops if op_def_registry.get(op) is not None}
for library in json.loads(sys.argv[2]):
    tf.load_op_library(library)
text = {op for op in ops if op not in core and op_def_registry.get(op) is not None}
other = set(ops) - core - text
print(json.dumps({"core": sorted(core), "text": sorted(text), "other": sorted(other)}))
"""
    ops = sorted(graph_ops(path))
    completed = subprocess.run(
        [sys.executable, "-c", script, json.dumps(ops), json.dumps(tensorflow_text_op_libraries())],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    kinds = json.loads(completed.stdout.strip().splitlines()[-1])
    assert kinds["other"] == []
    assert {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets"} <= set(kinds["text"])
    assert {"ParseExampleV2", "UnicodeTranscode", "BatchMatMulV2"} <= set(kinds["core"])


def test_contract_checks_pass_and_catch_violations(exported, tmp_path):
    path = exported[0]
    assert check_saved_model(path) == [
        "attention",
        "classify",
        "serve_token_ids",
        "serving_default",
    ]
    # A copy with a signature key renamed, a half-precision output and a foreign op.
    from tensorflow.core.protobuf import saved_model_pb2

    broken = tmp_path / "broken" / "1"
    shutil.copytree(path, broken)
    saved_model = saved_model_pb2.SavedModel.FromString((broken / "saved_model.pb").read_bytes())
    signatures = saved_model.meta_graphs[0].signature_def
    signatures["serving_default"].inputs["sentence"].CopyFrom(
        signatures["serving_default"].inputs["text"]
    )
    del signatures["serving_default"].inputs["text"]
    signatures["serve_token_ids"].outputs["logits"].dtype = tf.float16.as_datatype_enum
    saved_model.meta_graphs[0].graph_def.library.function[0].node_def.add(name="x", op="MyCustomOp")
    function = saved_model.meta_graphs[0].graph_def.library.function[1]
    function.attr["_XlaMustCompile"].b = True
    (broken / "saved_model.pb").write_bytes(saved_model.SerializeToString())
    with pytest.raises(ValueError) as error:
        check_saved_model(broken)
    message = str(error.value)
    for text in ("inputs ['sentence']", "'logits' is float16", "'MyCustomOp'", "_XlaMustCompile"):
        assert text in message, text


def test_warmup_records_parse_and_replay(exported):
    path, model, tokenizer = exported
    logs = read_warmup_requests(path)
    kinds = sorted(
        (
            log.WhichOneof("log_type"),
            (
                log.predict_log.request.model_spec.signature_name
                or log.classify_log.request.model_spec.signature_name
            ),
        )
        for log in logs
    )
    assert kinds == [
        ("classify_log", "classify"),
        ("predict_log", "attention"),
        ("predict_log", "serve_token_ids"),
        ("predict_log", "serving_default"),
    ]
    assert all(log.predict_log.request.model_spec.name in ("sentiment", "") for log in logs)
    replayed = dict(replay_warmup_requests(path))
    request = next(
        log.predict_log.request
        for log in logs
        if log.predict_log.request.model_spec.signature_name == "serving_default"
    )
    texts = [t.decode() for t in tf.make_ndarray(request.inputs["text"])]
    expected = tf.nn.softmax(model(tokenizer(tf.constant(texts)))).numpy()
    np.testing.assert_allclose(replayed["serving_default"]["probabilities"], expected, atol=1e-5)
    np.testing.assert_allclose(replayed["classify"]["scores"], expected, atol=1e-5)


def test_a_bad_warmup_record_fails_like_a_load(exported, tmp_path):
    path = tmp_path / "bad" / "1"
    shutil.copytree(exported[0], path)
    write_warmup_requests(
        path, {"serve_token_ids": {"token_ids": [[2, 5, 3]]}}, "sentiment"
    )  # inputs missing
    with pytest.raises(TypeError, match="segment_ids|padding_mask"):
        replay_warmup_requests(path)


def test_hostile_text_gets_well_defined_outputs(serving_default, exported):
    _, model, tokenizer = exported
    long_text = "good film " * 10_000  # 20,000+ characters: cut to the sequence length
    batches = {
        "empty strings": [b"", b""],
        "long": [long_text.encode()],
        "invalid utf-8": [b"good \xff\xfe\xfd film", b"\xc3\x28", b"\xed\xa0\x80"],
        "mixed lengths": [b"bad", long_text.encode(), b"", "Été".encode()],
    }
    for what, texts in batches.items():
        outputs = serving_default(text=tf.constant(texts))
        probabilities = outputs["probabilities"].numpy()
        assert probabilities.shape == (len(texts), 2), what
        assert np.isfinite(probabilities).all() and np.allclose(
            probabilities.sum(-1), 1, atol=1e-6
        ), what
    # Invalid bytes are replaced by U+FFFD before tokenising (then [UNK]); the rest is unchanged.
    cleaned = [t.decode("utf-8", "replace") for t in batches["invalid utf-8"]]
    expected = tf.nn.softmax(model(tokenizer(tf.constant(cleaned)))).numpy()
    np.testing.assert_allclose(
        serving_default(text=tf.constant(batches["invalid utf-8"]))["probabilities"],
        expected,
        atol=1e-5,
    )
    # A long text is cut exactly as a short one made of its first pieces.
    np.testing.assert_allclose(
        serving_default(text=tf.constant([long_text]))["probabilities"],
        serving_default(text=tf.constant(["good film " * 7]))["probabilities"],
        atol=1e-5,
    )
    # A batch of zero: empty outputs of the documented shapes.
    empty = serving_default(text=tf.zeros([0], tf.string))
    assert empty["probabilities"].shape == (0, 2) and empty["labels"].shape == (0,)
    # A wrong input type: a clear InvalidArgumentError, not a crash.
    with pytest.raises(tf.errors.InvalidArgumentError, match="string"):
        serving_default(text=tf.constant([1, 2]))


def test_classify_reports_a_missing_feature(exported):
    classify = tf.saved_model.load(str(exported[0])).signatures["classify"]
    example = tf.train.Example(
        features=tf.train.Features(
            feature={"sentence": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"good"]))}
        )
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="text"):
        classify(inputs=tf.constant([example.SerializeToString()]))
    with pytest.raises(tf.errors.InvalidArgumentError):
        classify(inputs=tf.constant([b"not a tf.Example"]))


def test_concurrent_calls_match_sequential_ones(serving_default):
    texts = [["the film was good ."], ["bad plot", "good"], ["", "film film film"], ["good " * 40]]
    expected = [serving_default(text=tf.constant(t))["probabilities"].numpy() for t in texts]

    def calls(worker):
        results = []
        for i in range(200):
            index = (worker + i) % len(texts)
            results.append(
                (index, serving_default(text=tf.constant(texts[index]))["probabilities"].numpy())
            )
        return results

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outcomes = [
            result
            for future in [pool.submit(calls, w) for w in range(8)]
            for result in future.result()
        ]
    assert len(outcomes) == 1600
    for index, probabilities in outcomes:
        np.testing.assert_array_equal(probabilities, expected[index])


@pytest.mark.slow
def test_export_and_predict_commands_on_a_tagging_run(tmp_path, capsys):
    """`keras-attn export` writes, checks and replays a tagger; `predict` prints word/tag."""
    import keras

    from keras_attn.models import BertTokenClassifier

    run = tmp_path / "run"
    run.mkdir()
    vocabulary = VOCABULARY + ["new", "york"]
    model = BertTokenClassifier(
        BertBackbone.from_size("tiny", vocabulary_size=len(vocabulary), max_sequence_length=16),
        num_classes=2,
    )
    model.save(run / "model.keras")
    (run / "vocab.txt").write_text("\n".join(vocabulary) + "\n")
    (run / "labels.json").write_text(json.dumps(["O", "LOC"]))
    (run / "config.yaml").write_text("model: {sequence_length: 16}\ndata: {task: tagging}\n")
    path = cli.main(["export", str(run), "--name", "ner", "--base", str(tmp_path / "saved_models")])
    assert path == tmp_path / "saved_models" / "ner" / "1"
    assert "docker run" in capsys.readouterr().out
    outputs = cli.main(["predict", str(path.parent), "--text", "New York film."])
    printed = capsys.readouterr().out.split()
    assert [w.split("/")[0] for w in printed] == ["New", "York", "film", "."]
    assert outputs["tags"].shape == (1, 4)
    assert keras.saving.load_model(run / "model.keras", compile=False).num_classes == 2
    # --quantize int8 (int8 weights) and --precision bfloat16: the same run, checked and
    # replayed as TF Serving would, the same words tagged, smaller weights.
    for version, (flag, value, share) in enumerate(
        (("--quantize", "int8", 0.5), ("--precision", "bfloat16", 0.6)), start=2
    ):
        other = cli.main(
            ["export", str(run), "--name", "ner", "--base", str(tmp_path / "saved_models")]
            + [flag, value]
        )
        assert other == tmp_path / "saved_models" / "ner" / str(version)
        capsys.readouterr()
        answer = cli.main(["predict", str(other), "--text", "New York film."])
        assert answer["words"].tolist() == outputs["words"].tolist()
        np.testing.assert_allclose(answer["probabilities"], outputs["probabilities"], atol=0.05)
        sizes = [sum(f.stat().st_size for f in (p / "variables").iterdir()) for p in (path, other)]
        assert sizes[1] < share * sizes[0], (value, sizes)
    with pytest.raises(SystemExit):
        cli.main(["export", str(run), "--quantize", "int4"])
