"""TF Serving's configuration files: models.config parses into ModelServerConfig,
the batching file into BatchingParameters; bad policies and labels are refused."""

import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from keras_attn.cli import main as cli
from keras_attn.export import batching_parameters, serving_config, write_serving_config
from keras_attn.export.model_server_config import batching_parameters_class, parse_version_policy


def _model(base, name, versions):
    for version in versions:
        (base / name / str(version)).mkdir(parents=True)
        (base / name / str(version) / "saved_model.pb").touch()
    (base / name / "not-a-version").mkdir()
    return base / name


def test_models_config_parses_into_model_server_config(tmp_path):
    sentiment, ner = _model(tmp_path, "sentiment", [1, 2, 3]), _model(tmp_path, "ner", [4])
    files = write_serving_config(
        [
            {"path": sentiment, "versions": "latest:2", "labels": {"stable": 2, "canary": 3}},
            {"path": ner, "name": "tagger", "versions": "specific:4"},
        ],
        tmp_path / "config" / "models.config",
        base_path="/models/",
        batching={"max_batch_size": 16},
    )
    config = text_format.Parse(files[0].read_text(), model_server_config_pb2.ModelServerConfig())
    first, second = config.model_config_list.config
    assert (first.name, first.base_path, first.model_platform) == (
        "sentiment",
        "/models/sentiment",
        "tensorflow",
    )
    assert first.model_version_policy.latest.num_versions == 2
    assert dict(first.version_labels) == {"stable": 2, "canary": 3}
    assert (second.name, second.base_path) == ("tagger", "/models/ner")
    assert list(second.model_version_policy.specific.versions) == [4]
    batching = text_format.Parse(files[1].read_text(), batching_parameters_class()())
    assert batching.max_batch_size.value == 16 and batching.pad_variable_length_inputs
    # Without base_path: absolute paths on this machine, the latest version, all versions.
    config = serving_config([{"path": sentiment, "versions": "all"}, {"path": ner}])
    assert config.model_config_list.config[0].base_path == str(sentiment.resolve())
    assert (
        config.model_config_list.config[0].model_version_policy.WhichOneof("policy_choice") == "all"
    )
    assert config.model_config_list.config[1].model_version_policy.latest.num_versions == 1


def test_batching_parameters_field_numbers_match_tf_serving():
    # session_bundle_config.proto: max_batch_size = 1, ..., pad_variable_length_inputs = 7.
    message = batching_parameters(
        max_batch_size=8, batch_timeout_micros=0, allowed_batch_sizes=[4, 8]
    )
    fields = {f.name: f.number for f in message.DESCRIPTOR.fields}
    assert fields == {
        "max_batch_size": 1,
        "batch_timeout_micros": 2,
        "max_enqueued_batches": 3,
        "num_batch_threads": 4,
        "thread_pool_name": 5,
        "allowed_batch_sizes": 6,
        "pad_variable_length_inputs": 7,
    }
    assert (
        message.DESCRIPTOR.fields_by_name["max_batch_size"].message_type.full_name
        == "google.protobuf.Int64Value"
    )
    assert "allowed_batch_sizes: 4" in str(message)


@pytest.mark.parametrize(
    "models, match",
    [
        ([{"path": "missing"}], "numbered SavedModel versions"),
        ([{"path": "SENTIMENT", "versions": "newest"}], "version policy"),
        ([{"path": "SENTIMENT", "versions": "specific:9"}], r"versions \[9\]"),
        ([{"path": "SENTIMENT", "labels": {"stable": 1}}], "does not serve"),
        ([{"path": "SENTIMENT", "versions": "all", "labels": {"1bad": 1}}], "label"),
        ([{"path": "SENTIMENT"}, {"path": "SENTIMENT"}], "Two models named"),
        ([{"path": "SENTIMENT", "version": "all"}], "Unknown model keys"),
    ],
)
def test_bad_serving_configs_are_refused(tmp_path, models, match):
    sentiment = _model(tmp_path, "sentiment", [1, 2])
    models = [
        {
            k: (str(sentiment) if v == "SENTIMENT" else str(tmp_path / v) if k == "path" else v)
            for k, v in m.items()
        }
        for m in models
    ]
    with pytest.raises(ValueError, match=match):
        serving_config(models)


def test_bad_batching_parameters_are_refused():
    with pytest.raises(ValueError, match="max_batch_size"):
        batching_parameters(max_batch_size=0)
    with pytest.raises(ValueError, match="allowed_batch_sizes"):
        batching_parameters(max_batch_size=8, allowed_batch_sizes=[4, 16])
    assert parse_version_policy("latest") == ("latest", [1])
    assert parse_version_policy("specific:3,1") == ("specific", [1, 3])


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory):
    from keras_attn.data import WordPieceTokenizer
    from keras_attn.export import export_saved_model
    from keras_attn.models import BertBackbone, BertClassifier

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]
    model = BertClassifier(
        BertBackbone.from_size("tiny", vocabulary_size=7, max_sequence_length=16), num_classes=2
    )
    return export_saved_model(
        model,
        WordPieceTokenizer(vocabulary, sequence_length=16),
        tmp_path_factory.mktemp("export") / "tiny" / "1",
        warmup=False,
    )


def _exported(base, name, versions, export):
    """A model folder whose versions are copies of a real export (the command loads each
    version it will serve, as TF Serving would)."""
    import shutil

    for version in versions:
        shutil.copytree(export, base / name / str(version))
    return base / name


@pytest.mark.slow  # 3.5 s on the 2 busy cores: out of `make test-fast`
def test_serving_config_command(tmp_path, capsys, tiny_export):
    sentiment = _exported(tmp_path, "sentiment", [1, 2], tiny_export)
    ner = _exported(tmp_path, "ner", [1], tiny_export)
    files = cli.main(
        [
            "serving-config",
            str(sentiment),
            str(ner),
            "--output",
            str(tmp_path / "models.config"),
            "--base-path",
            "/models",
            "--versions",
            "sentiment=all",
            "--label",
            "sentiment:stable=1",
            "--batching",
            "--max-batch-size",
            "8",
        ]
    )
    out = capsys.readouterr().out
    assert (
        "docker run" in out
        and "--model_config_file=/config/models.config" in out
        and "--enable_batching" in out
    )
    # The image of the installed TensorFlow's version, as `keras-attn export` prints it.
    assert f"tensorflow/serving:{'.'.join(tf.__version__.split('.')[:2])}.0 " in out
    config = text_format.Parse(files[0].read_text(), model_server_config_pb2.ModelServerConfig())
    assert [c.name for c in config.model_config_list.config] == ["sentiment", "ner"]
    assert dict(config.model_config_list.config[0].version_labels) == {"stable": 1}
    with pytest.raises(SystemExit):
        cli.main(["serving-config", str(sentiment), "--label", "other:stable=1"])
    assert "no model named 'other'" in capsys.readouterr().err
    # A served version that TF Serving could not load is named now, with its file.
    (sentiment / "2" / "saved_model.pb").write_bytes(b"cut short")
    with pytest.raises(SystemExit) as stopped:
        cli.main(["serving-config", str(sentiment), "--output", str(tmp_path / "again.config")])
    assert stopped.value.code == 2 and not (tmp_path / "again.config").exists()
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "sentiment/2 is a damaged export" in error[0]
    assert "saved_model.pb" in error[0]


def test_recommend_batching_reads_the_curve():
    from keras_attn.export import recommend_batching

    # Throughput 100, 167, 200, 211 /s: doubling from 4 to 8 gains 5%, so batches stop at 4.
    curve = [{"batch": b, "p50_ms": ms} for b, ms in ((1, 10.0), (2, 12.0), (4, 20.0), (8, 38.0))]
    assert recommend_batching(curve, cores=2) == {
        "max_batch_size": 4,
        "allowed_batch_sizes": [1, 2, 4],
        "batch_timeout_micros": 5000,
        "num_batch_threads": 2,
        "max_enqueued_batches": 100,
    }
    # Still gaining at the largest size measured: that size; a fast model queues more.
    fast = [{"batch": b, "p50_ms": 0.1 * b**0.5} for b in (1, 2, 4)]
    recommended = recommend_batching(fast, cores=1)
    assert recommended["max_batch_size"] == 4 and recommended["max_enqueued_batches"] == 5000
    assert recommended["batch_timeout_micros"] == 100
    with pytest.raises(ValueError, match="curve"):
        recommend_batching([])


@pytest.mark.slow
def test_serving_config_measures_batching_on_an_export(tmp_path, capsys):
    from keras_attn.data import WordPieceTokenizer
    from keras_attn.export import export_saved_model, measure_batching
    from keras_attn.models import BertBackbone, BertClassifier

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]
    model = BertClassifier(
        BertBackbone.from_size("tiny", vocabulary_size=7, max_sequence_length=16), num_classes=2
    )
    export_saved_model(
        model, WordPieceTokenizer(vocabulary, sequence_length=16), tmp_path / "reviews" / "1"
    )
    curve = measure_batching(tmp_path / "reviews", batch_sizes=[1, 4], calls=2)
    assert [row["batch"] for row in curve] == [1, 4] and all(r["p50_ms"] > 0 for r in curve)
    files = cli.main(
        ["serving-config", str(tmp_path / "reviews"), "--output", str(tmp_path / "models.config")]
        + ["--batching", "--measure", "--measure-batch-sizes", "1", "2", "--num-batch-threads", "3"]
    )
    out = capsys.readouterr().out
    assert "requests/s" in out and "batching: max_batch_size" in out
    message = text_format.Parse(files[1].read_text(), batching_parameters_class()())
    assert message.max_batch_size.value in (1, 2) and message.num_batch_threads.value == 3
    assert list(message.allowed_batch_sizes) == [1, 2][: message.max_batch_size.value]
    assert message.batch_timeout_micros.value > 0
    with pytest.raises(SystemExit):
        cli.main(["serving-config", str(tmp_path / "reviews"), "--measure"])
    assert "give --batching too" in capsys.readouterr().err
    with pytest.raises(ValueError, match="batch_sizes"):
        measure_batching(tmp_path / "reviews", batch_sizes=[4, 1])
