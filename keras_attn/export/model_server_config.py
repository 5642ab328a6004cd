"""TF Serving's configuration files: `models.config` and the batching parameters.

`models.config` is a text-format `ModelServerConfig` (`--model_config_file`):
one `config` per model with its base path, version policy and version labels.
The batching file is a text-format `BatchingParameters`
(`--enable_batching --batching_parameters_file`).
"""

import pathlib
import re

from keras_attn.api_export import keras_attn_export

# BatchingParameters (tensorflow_serving/servables/tensorflow/session_bundle_config.proto)
BATCHING_FIELDS = {
    "max_batch_size": 1,
    "batch_timeout_micros": 2,
    "max_enqueued_batches": 3,
    "num_batch_threads": 4,
    "thread_pool_name": 5,
    "allowed_batch_sizes": 6,
    "pad_variable_length_inputs": 7,
}
_BATCHING_CLASS = []


def batching_parameters_class():
    """TF Serving's `BatchingParameters` message class.

    tensorflow-serving-api does not ship the servables' protos, so the message is
    declared here from its published field numbers and types (wrapper types for
    the scalars, as the server reads them).
    """
    if _BATCHING_CLASS:
        return _BATCHING_CLASS[0]
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    file = descriptor_pb2.FileDescriptorProto(
        name="keras_attn/batching_parameters.proto",
        package="tensorflow.serving",
        syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"],
    )
    message = file.message_type.add(name="BatchingParameters")
    field = descriptor_pb2.FieldDescriptorProto
    for name, number in BATCHING_FIELDS.items():
        if name == "allowed_batch_sizes":
            message.field.add(
                name=name, number=number, type=field.TYPE_INT64, label=field.LABEL_REPEATED
            )
        elif name == "pad_variable_length_inputs":
            message.field.add(
                name=name, number=number, type=field.TYPE_BOOL, label=field.LABEL_OPTIONAL
            )
        else:
            wrapper = (
                ".google.protobuf.StringValue"
                if name == "thread_pool_name"
                else ".google.protobuf.Int64Value"
            )
            message.field.add(
                name=name,
                number=number,
                type=field.TYPE_MESSAGE,
                type_name=wrapper,
                label=field.LABEL_OPTIONAL,
            )
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters")
    _BATCHING_CLASS.append(message_factory.GetMessageClass(descriptor))
    return _BATCHING_CLASS[0]


@keras_attn_export("keras_attn.export.batching_parameters")
def batching_parameters(
    max_batch_size=32,
    batch_timeout_micros=2000,
    max_enqueued_batches=100,
    num_batch_threads=4,
    allowed_batch_sizes=None,
    pad_variable_length_inputs=True,
):
    """A `BatchingParameters` message for TF Serving's `--batching_parameters_file`.

    Args:
        max_batch_size: the largest batch the server forms.
        batch_timeout_micros: how long a request waits for others to join its batch.
        max_enqueued_batches: queue length, in batches, before requests are refused.
        num_batch_threads: threads running batches (about the cores to give).
        allowed_batch_sizes: batch sizes to pad to, increasing, ending with
            `max_batch_size` (None: any size).
        pad_variable_length_inputs: pad requests of different lengths to one
            (`serve_token_ids` calls of different sequence lengths batch together).

    Returns:
        The message; `str(message)` is the file's text format.

    Example:

    >>> from keras_attn.export import batching_parameters
    >>> print(batching_parameters(max_batch_size=8, allowed_batch_sizes=[2, 8]))
    max_batch_size { value: 8 } batch_timeout_micros { value: 2000 }
    max_enqueued_batches { value: 100 } num_batch_threads { value: 4 }
    allowed_batch_sizes: 2 allowed_batch_sizes: 8 pad_variable_length_inputs: true
    """
    for name, value in (
        ("max_batch_size", max_batch_size),
        ("batch_timeout_micros", batch_timeout_micros),
        ("max_enqueued_batches", max_enqueued_batches),
        ("num_batch_threads", num_batch_threads),
    ):
        if (
            not isinstance(value, int)
            or isinstance(value, bool)
            or value < (0 if name == "batch_timeout_micros" else 1)
        ):
            raise ValueError(f"Expected `{name}` to be a positive int. Received: {name}={value!r}")
    sizes = list(allowed_batch_sizes or [])
    if sizes and (sizes != sorted(set(sizes)) or sizes[-1] != max_batch_size or sizes[0] < 1):
        raise ValueError(
            "Expected `allowed_batch_sizes` increasing and ending with `max_batch_size` "
            f"({max_batch_size}). Received: allowed_batch_sizes={allowed_batch_sizes!r}"
        )
    message = batching_parameters_class()()
    message.max_batch_size.value = max_batch_size
    message.batch_timeout_micros.value = batch_timeout_micros
    message.max_enqueued_batches.value = max_enqueued_batches
    message.num_batch_threads.value = num_batch_threads
    message.allowed_batch_sizes.extend(sizes)
    message.pad_variable_length_inputs = bool(pad_variable_length_inputs)
    return message


def serving_image():
    """The `tensorflow/serving` image whose version matches the installed TensorFlow
    (the ops an export holds), e.g. `tensorflow/serving:2.21.0`."""
    from importlib.metadata import version

    return "tensorflow/serving:" + ".".join(version("tensorflow").split(".")[:2]) + ".0"


def model_versions(folder):
    """The numbered versions (each holding a `saved_model.pb`) of a model folder."""
    folder = pathlib.Path(folder)
    return sorted(
        int(p.name)
        for p in folder.iterdir()
        if p.name.isdigit() and (p / "saved_model.pb").is_file()
    )


def served_versions(available, policy="latest"):
    """The version numbers of `available` (sorted) that the version `policy` serves."""
    kind, numbers = parse_version_policy(policy)
    return {
        "latest": available[-numbers[0] :] if numbers else available[-1:],
        "all": available,
        "specific": numbers,
    }[kind]


def parse_version_policy(spec):
    """`"latest"`, `"latest:N"`, `"all"` or `"specific:1,3"` -> `(kind, numbers)`."""
    match = re.fullmatch(r"(latest)(?::(\d+))?|(all)|specific:(\d+(?:,\d+)*)", str(spec))
    if not match:
        raise ValueError(
            f"Expected a version policy 'latest', 'latest:N', 'all' or 'specific:1,2'. "
            f"Received: {spec!r}"
        )
    if match.group(1):
        return "latest", [int(match.group(2) or 1)]
    if match.group(3):
        return "all", []
    return "specific", sorted({int(v) for v in match.group(4).split(",")})


@keras_attn_export("keras_attn.export.serving_config")
def serving_config(models, base_path=None):
    """A `ModelServerConfig` serving several exported models.

    Args:
        models: a list of dicts, one per model: `path` (a model folder of numbered
            versions, `saved_models/<name>`), and optionally `name` (default: the
            folder's name), `versions` (a policy: `"latest"` (default),
            `"latest:N"`, `"all"`, `"specific:1,2"`) and `labels` (`{"stable": 1}`,
            each version served by the policy).
        base_path: the folder the server sees `saved_models` as (e.g. `/models`
            in the `tensorflow/serving` container); default: each model's absolute
            path on this machine.

    Returns:
        The `tensorflow.serving.ModelServerConfig`; `str(config)` is the text
        format of `--model_config_file`.

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.export import serving_config
    >>> base = pathlib.Path(tempfile.mkdtemp())
    >>> for version in (1, 2):
    ...     (base / "sentiment" / str(version)).mkdir(parents=True)
    ...     (base / "sentiment" / str(version) / "saved_model.pb").touch()
    >>> model = {"path": base / "sentiment", "versions": "all", "labels": {"stable": 1}}
    >>> print(serving_config([model], base_path="/models"))
    model_config_list { config { name: "sentiment" base_path: "/models/sentiment"
    model_platform: "tensorflow" model_version_policy { all { } }
    version_labels { key: "stable" value: 1 } } }
    """
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    names = set()
    for model in models:
        if not isinstance(model, dict) or "path" not in model:
            raise TypeError(f"Expected each model as a dict with 'path'. Received: {model!r}")
        unknown = set(model) - {"path", "name", "versions", "labels"}
        if unknown:
            raise ValueError(
                f"Unknown model keys {sorted(unknown)}; expected path, name, versions, labels"
            )
        folder = pathlib.Path(model["path"])
        available = model_versions(folder) if folder.is_dir() else []
        if not available:
            raise ValueError(
                "Expected a model folder of numbered SavedModel versions. Received: "
                f"path={str(folder)!r}"
            )
        name = model.get("name") or folder.name
        if name in names:
            raise ValueError(f"Two models named {name!r}; give one a different 'name'")
        names.add(name)
        kind, numbers = parse_version_policy(model.get("versions", "latest"))
        served = served_versions(available, model.get("versions", "latest"))
        missing = sorted(set(numbers) - set(available)) if kind == "specific" else []
        if missing:
            raise ValueError(
                f"Model {name!r}: versions {missing} not in {folder} (has {available})"
            )
        entry = config.model_config_list.config.add(
            name=name,
            model_platform="tensorflow",
            base_path=f"{base_path.rstrip('/')}/{folder.name}"
            if base_path
            else str(folder.resolve()),
        )
        if kind == "latest":
            entry.model_version_policy.latest.num_versions = numbers[0]
        elif kind == "all":
            entry.model_version_policy.all.SetInParent()
        else:
            entry.model_version_policy.specific.versions.extend(numbers)
        for label, version in (model.get("labels") or {}).items():
            if not re.fullmatch(r"[A-Za-z0-9_-]+", str(label)) or str(label)[0].isdigit():
                raise ValueError(
                    f"Model {name!r}: a label is letters, digits, '_', '-', not starting with "
                    f"a digit. Received: {label!r}"
                )
            if version not in served:
                raise ValueError(
                    f"Model {name!r}: label {label!r} points at version {version}, which the "
                    f"policy does not serve ({served}); TF Serving would refuse it"
                )
            entry.version_labels[str(label)] = int(version)
    return config


@keras_attn_export("keras_attn.export.write_serving_config")
def write_serving_config(models, output, base_path=None, batching=None):
    """Writes `models.config` (and the batching file) for `tensorflow_model_server`.

    Args:
        models: as `serving_config`.
        output: the `models.config` path to write.
        base_path: as `serving_config`.
        batching: a `batching_parameters(...)` message (or a dict of its arguments)
            to write next to it as `batching.config`; None: no batching file.

    Returns:
        The files written, `[models.config (, batching.config)]`.

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.export import write_serving_config
    >>> base = pathlib.Path(tempfile.mkdtemp())
    >>> (base / "m" / "1").mkdir(parents=True); (base / "m" / "1" / "saved_model.pb").touch()
    >>> written = write_serving_config([{"path": base / "m"}], base / "models.config", batching={})
    >>> [p.name for p in written]
    ['models.config', 'batching.config']
    """
    output = pathlib.Path(output)
    # Both messages are built (and so checked) before either file is written: bad
    # batching values leave no models.config behind.
    texts = {output: str(serving_config(models, base_path))}
    if batching is not None:
        message = batching_parameters(**batching) if isinstance(batching, dict) else batching
        texts[output.parent / "batching.config"] = str(message)
    output.parent.mkdir(parents=True, exist_ok=True)
    for path, text in texts.items():
        path.write_text(text)
    return list(texts)
