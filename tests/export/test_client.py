"""The client's REST and gRPC requests, against a local stand-in that answers the way
TF Serving's APIs are documented (`stand_in_server.py`), backed by a real export."""

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer
from keras_attn.export import client, export_saved_model
from keras_attn.models import BertBackbone, BertClassifier
from tests.export.stand_in_server import StandInServer

# One worker runs this module: its module fixtures are made once (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("test_client")

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film"]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    model = BertClassifier(
        BertBackbone.from_size("tiny", vocabulary_size=len(VOCABULARY)), num_classes=2
    )
    return export_saved_model(
        model,
        WordPieceTokenizer(VOCABULARY, sequence_length=8),
        tmp_path_factory.mktemp("client") / "sentiment" / "1",
        labels=["neg", "pos"],
    )


@pytest.fixture(scope="module")
def signatures(export):
    return tf.saved_model.load(str(export)).signatures


def test_rest_bodies_and_urls():
    assert client.rest_url("localhost:8501", "m") == "http://localhost:8501/v1/models/m:predict"
    assert (
        client.rest_url("https://h", "m", label="stable", verb="classify")
        == "https://h/v1/models/m/labels/stable:classify"
    )
    body = client.rest_predict_body(
        {"token_ids": np.array([[2, 5, 3]]), "segment_ids": [[0, 0, 0]]}, "serve_token_ids"
    )
    assert body == {
        "signature_name": "serve_token_ids",
        "instances": [{"token_ids": [2, 5, 3], "segment_ids": [0, 0, 0]}],
    }
    assert client.rest_predict_body({"text": [b"\xff"]}, format="columnar")["inputs"]["text"] == [
        {"b64": "/w=="}
    ]
    assert client.rest_classify_body([{"text": "good"}])["examples"] == [{"text": "good"}]
    with pytest.raises(ValueError, match="same batch size"):
        client.rest_predict_body({"a": [1], "b": [1, 2]})
    with pytest.raises(ValueError, match="format"):
        client.rest_predict_body({"a": [1]}, format="rows")
    with pytest.raises(ValueError, match="version"):
        client.rest_url("h", "m", version=1, label="x")
    with pytest.raises(RuntimeError, match="refused"):
        client.parse_rest_response({"error": "bad input"})
    parsed = client.parse_rest_response(
        '{"outputs": {"labels": ["pos"], "probabilities": [[0.1, 0.9]]}}'
    )
    assert parsed["probabilities"].shape == (1, 2)
    assert client.parse_rest_response({"predictions": [[0.1, 0.9]]}, ["probabilities"])[
        "probabilities"
    ].shape == (1, 2)
    assert client.parse_rest_response({"results": [[["neg", 0.1], ["pos", 0.9]]]})[
        "classes"
    ].tolist() == [["neg", "pos"]]


@pytest.mark.slow  # 5 s on the 2 busy cores: out of `make test-fast`
def test_predict_rest_row_and_columnar(export, signatures):
    with StandInServer(export.parent.parent, "sentiment") as server:
        address = f"127.0.0.1:{server.rest_port}"
        expected = signatures["serving_default"](text=tf.constant(["good film", "bad"]))
        for format in ("row", "columnar"):
            outputs = client.predict_rest(
                address, "sentiment", {"text": ["good film", "bad"]}, version=1, format=format
            )
            np.testing.assert_allclose(
                outputs["probabilities"], expected["probabilities"].numpy(), atol=1e-6
            )
            assert outputs["labels"].tolist() == expected["labels"].numpy().astype(str).tolist()
        with pytest.raises(RuntimeError, match="answered 400"):
            client.predict_rest(address, "other", {"text": ["good"]})


def test_predict_and_classify_grpc(export, signatures):
    with StandInServer(export.parent.parent, "sentiment") as server:
        port = server.grpc_port
        expected = signatures["serving_default"](text=tf.constant(["good film", "bad"]))[
            "probabilities"
        ].numpy()
        outputs = client.predict_grpc(
            f"127.0.0.1:{port}", "sentiment", {"text": ["good film", "bad"]}
        )
        np.testing.assert_allclose(outputs["probabilities"], expected, atol=1e-6)
        ids = {
            "token_ids": [[2, 5, 7, 3]],
            "segment_ids": [[0, 0, 0, 0]],
            "padding_mask": [[1, 1, 1, 1]],
        }
        request = client.grpc_predict_request("sentiment", ids, "serve_token_ids", version=1)
        assert (
            request.inputs["token_ids"].dtype == tf.int32.as_datatype_enum
            and request.model_spec.version.value == 1
        )
        outputs = client.predict_grpc(f"127.0.0.1:{port}", "sentiment", ids, "serve_token_ids")
        np.testing.assert_allclose(outputs["probabilities"][0], expected[0], atol=1e-6)
        classified = client.classify_grpc(
            f"127.0.0.1:{port}", "sentiment", [{"text": "good film"}, {"text": "bad"}]
        )
        assert classified["classes"].tolist() == [["neg", "pos"]] * 2
        np.testing.assert_allclose(classified["scores"], expected, atol=1e-6)
        assert (
            client.grpc_classify_request(
                "m", [{"text": "x"}], label="stable"
            ).model_spec.version_label
            == "stable"
        )
