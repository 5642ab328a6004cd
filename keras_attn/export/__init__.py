"""Export: SavedModels in TF Serving's layout, with the tokenizer inside the graph.

`export_saved_model` writes one version folder (staged, then renamed into place:
`keras_attn.export.versions`); `check_saved_model` and
`replay_warmup_requests` check it as TF Serving's loader would;
`quantized_copy` gives a model int8 weights (`export_saved_model(...,
quantize="int8")`), `precision_copy` bfloat16 ones (`precision="bfloat16"`);
`write_serving_config` writes the server's `models.config` and batching file;
`keras_attn.export.client` calls a running server (REST and gRPC); `measure_batching`
times an export at growing batch sizes and `recommend_batching` turns that curve into
the batching file's settings. `export_model(..., format=...)` writes any of the four
formats: the SavedModel, or a classifier as one ONNX (`export_onnx`, `onnx_session`),
OpenVINO (`export_openvino`, `openvino_model`) or LiteRT (`export_litert`,
`litert_runner`) file that takes raw text, with a checksum beside it that those loaders
check (`verify_checksum`).
"""

from keras_attn.requirements import require_tensorflow

require_tensorflow("keras_attn.export (SavedModels for TF Serving)")

from keras_attn.export import client
from keras_attn.export.batching import measure_batching, recommend_batching
from keras_attn.export.checks import (
    check_saved_model,
    graph_ops,
    read_warmup_requests,
    replay_warmup_requests,
)
from keras_attn.export.formats import export_model
from keras_attn.export.litert_export import export_litert, litert_runner
from keras_attn.export.model_server_config import (
    batching_parameters,
    serving_config,
    write_serving_config,
)
from keras_attn.export.one_file import verify_checksum
from keras_attn.export.onnx_export import export_onnx, onnx_session
from keras_attn.export.openvino_export import export_openvino, openvino_model
from keras_attn.export.quantization import precision_copy, quantized_copy
from keras_attn.export.saved_model import export_saved_model
from keras_attn.export.versions import load_saved_model, next_version_dir
from keras_attn.export.warmup import write_warmup_requests

__all__ = [
    "batching_parameters",
    "client",
    "check_saved_model",
    "export_litert",
    "export_model",
    "export_onnx",
    "export_openvino",
    "export_saved_model",
    "graph_ops",
    "litert_runner",
    "load_saved_model",
    "measure_batching",
    "next_version_dir",
    "onnx_session",
    "openvino_model",
    "precision_copy",
    "quantized_copy",
    "read_warmup_requests",
    "recommend_batching",
    "replay_warmup_requests",
    "verify_checksum",
    "serving_config",
    "write_serving_config",
    "write_warmup_requests",
]
