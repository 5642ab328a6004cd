"""The runtimes `keras-attn predict` runs an export on besides TensorFlow: ONNX Runtime
(`.onnx`), OpenVINO (`.xml`) and LiteRT (`.tflite`). Each loader gives `(call, inputs,
output names)`: `call(**{input: list of bytes})` -> `{output: numpy array}`, strings as
bytes, as a SavedModel's `serving_default` answers."""

import pathlib
import sys

from keras_attn.errors import UserInputError
from keras_attn.export_formats import format_of_file


def runtime_name(path):
    """`"ONNX"`, `"OpenVINO"`, `"LiteRT"` (`keras_attn.export_formats`' runtime) for a
    file those runtimes read; `None` for a SavedModel."""
    record = format_of_file(path)
    return None if record is None else record.runtime


def _texts(values, np):
    """Bytes as the runtimes take text: decoded as UTF-8, a byte that is not UTF-8 read
    as U+FFFD (as the SavedModel's graph cleans it)."""
    return np.array([v.decode("utf-8", errors="replace") for v in values], object)


def _as_served(names, values, np):
    """`{name: value}`, strings as bytes, of any rank (the SavedModel's answer)."""

    def as_bytes(value):
        flat = [x if isinstance(x, bytes) else str(x).encode() for x in value.reshape(-1)]
        return np.array(flat, object).reshape(value.shape)

    return {
        name: as_bytes(value) if value.dtype.kind in "OUS" else value
        for name, value in zip(names, values, strict=True)
    }


def _loaded(path, load, reason):
    """`load(path)`; a missing or damaged file is one error line naming the runtime."""
    record = format_of_file(path)
    kind, runtime = record.runtime, record.runtime_long
    if not pathlib.Path(path).is_file():
        raise UserInputError(f"{path}: no such {kind} file")
    from keras_attn.export.one_file import ChecksumMismatch, checksum_path

    try:
        loaded = load(path)
    except ChecksumMismatch as error:  # changed since export: said as it is
        raise UserInputError(str(error)) from None
    except Exception as error:  # the runtime's own errors for a damaged file
        article = "an" if kind[0] in "AEIOU" else "a"
        raise UserInputError(
            f"{path}: not {article} {kind} model {runtime} loads ({reason(error)})"
        ) from None
    if not checksum_path(path).is_file():  # made elsewhere, or its checksum removed
        print(
            f"note: no {checksum_path(path).name} beside {path}: its integrity is not checked",
            file=sys.stderr,
        )
    return loaded


def onnx_call(path, reason):
    """An `.onnx` export on ONNX Runtime (with onnxruntime-extensions' operators)."""
    import numpy as np

    from keras_attn.export.onnx_export import onnx_session

    session = _loaded(path, onnx_session, reason)
    names = [o.name for o in session.get_outputs()]

    def run(**given):
        feeds = {name: _texts(values, np) for name, values in given.items()}
        return _as_served(names, session.run(names, feeds), np)

    return run, sorted(i.name for i in session.get_inputs()), sorted(names)


def openvino_call(path, reason):
    """An `.xml` export on OpenVINO's CPU plugin, float32 (openvino-tokenizers' operators
    loaded). OpenVINO cannot read an empty string tensor: an empty request is answered
    here with empty outputs of the model's types."""
    import numpy as np

    from keras_attn.export.openvino_export import openvino_model

    compiled = _loaded(path, openvino_model, reason)
    names = [o.get_any_name() for o in compiled.outputs]
    inputs = [i.get_any_name() for i in compiled.inputs]

    def empty(output):
        shape = [0] + [d.get_length() for d in list(output.get_partial_shape())[1:]]
        kind = output.get_element_type().to_dtype()
        return np.zeros(shape, object if kind.kind in "OUS" else kind)

    def run(**given):
        if not any(len(values) for values in given.values()):
            return _as_served(names, [empty(o) for o in compiled.outputs], np)
        feeds = [np.array(list(_texts(given[name], np)), str) for name in inputs]
        answer = compiled(feeds)
        return _as_served(names, [answer[name] for name in names], np)

    return run, sorted(inputs), sorted(names)


def litert_call(path, reason):
    """A `.tflite` export on `ai-edge-litert`'s interpreter (TensorFlow Text's tokenizer
    operators registered)."""
    import numpy as np

    from keras_attn.export.litert_export import litert_runner

    runner = _loaded(path, litert_runner, reason)
    details = runner.get_input_details(), runner.get_output_details()
    inputs, names = sorted(details[0]), sorted(details[1])

    def run(**given):
        feeds = {
            name: np.array([t.encode() for t in _texts(values, np)], object)
            for name, values in given.items()
        }
        answer = runner(**feeds)
        return _as_served(names, [answer[name] for name in names], np)

    return run, inputs, names
