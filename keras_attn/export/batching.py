"""TF Serving's batching settings from the batch-size/latency curve this machine shows."""

import os
import statistics
import time

import numpy as np
import tensorflow as tf

from keras_attn.api_export import keras_attn_export

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
# Doubling the batch must raise throughput by at least this much to be worth forming.
MIN_GAIN = 1.1


@keras_attn_export("keras_attn.export.measure_batching")
def measure_batching(saved_model, batch_sizes=BATCH_SIZES, calls=10, warmup=2):
    """Times an export's `serving_default` at each batch size: the latency curve.

    The requests are the export's own warm-up request for `serving_default` (a
    short text and one cut at the sequence length), its rows repeated to each batch
    size, so every batch holds a full-length text: the curve is the worst case the
    server's padding can meet.

    Args:
        saved_model: a version folder, or a model folder (its latest version).
        batch_sizes: increasing batch sizes to time.
        calls: timed calls per batch size (the median is kept).
        warmup: untimed calls per batch size first.

    Returns:
        A list of dicts, one per batch size: `batch`, `p50_ms`, `throughput`
        (requests per second at that batch size).

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import export_saved_model, measure_batching
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]
    >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=7), num_classes=2)
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "reviews"
    >>> _ = export_saved_model(model, WordPieceTokenizer(vocab, sequence_length=8), folder / "1")
    >>> curve = measure_batching(folder, batch_sizes=[1, 4], calls=2)
    >>> [row["batch"] for row in curve], all(row["p50_ms"] > 0 for row in curve)
    ([1, 4], True)
    """
    from keras_attn.export.checks import read_warmup_requests
    from keras_attn.export.versions import load_saved_model, split_target

    sizes = list(batch_sizes)
    if not sizes or sizes != sorted(set(sizes)) or sizes[0] < 1:
        raise ValueError(
            f"Expected `batch_sizes` increasing and >= 1. Received: batch_sizes={batch_sizes!r}"
        )
    loaded = load_saved_model(saved_model)
    folder = _version_folder(saved_model, split_target)
    requests = [
        log.predict_log.request
        for log in read_warmup_requests(folder)
        if log.HasField("predict_log")
        and log.predict_log.request.model_spec.signature_name == "serving_default"
    ]
    if not requests:
        raise ValueError(
            f"{folder} has no warm-up request for serving_default to time (export it with "
            "warmup=True)."
        )
    rows = {name: tf.make_ndarray(proto) for name, proto in requests[0].inputs.items()}
    signature = loaded.signatures["serving_default"]
    curve = []
    for batch in sizes:
        index = np.arange(batch) % len(next(iter(rows.values())))
        inputs = {name: tf.constant(value[index]) for name, value in rows.items()}
        for _ in range(warmup):
            signature(**inputs)
        times = []
        for _ in range(calls):
            began = time.perf_counter()
            signature(**inputs)
            times.append(time.perf_counter() - began)
        p50 = statistics.median(times)
        curve.append({"batch": batch, "p50_ms": p50 * 1000, "throughput": batch / p50})
    return curve


def _version_folder(path, split_target):
    import pathlib

    path = pathlib.Path(path)
    if (path / "saved_model.pb").is_file():
        return path
    versions = sorted((int(p.name), p) for p in path.iterdir() if p.name.isdigit())
    if not versions:
        model_dir, _ = split_target(path)
        raise ValueError(f"{model_dir} holds no version folder")
    return versions[-1][1]


@keras_attn_export("keras_attn.export.recommend_batching")
def recommend_batching(curve, cores=None):
    """`batching_parameters` arguments read off a latency curve (`measure_batching`).

    - `max_batch_size`: the batch size after which doubling raises throughput by
      less than 10%: larger batches only add latency;
    - `allowed_batch_sizes`: the measured sizes up to it (the server pads a batch
      to the next one, so it runs only shapes that were warmed);
    - `batch_timeout_micros`: half the batch-1 latency: a lone request waits at most
      half again its own time for company (in steps of 100, at least 100);
    - `num_batch_threads`: the machine's cores (TF Serving's advice for CPUs);
    - `max_enqueued_batches`: TF Serving's usual 100, or one second of full batches
      at the best throughput if that is more.

    Args:
        curve: `measure_batching`'s list, increasing batch sizes.
        cores: cores to give the server (default: this machine's).

    Returns:
        A dict of `batching_parameters` arguments.

    Example:

    >>> from keras_attn.export import recommend_batching
    >>> curve = [{"batch": 1, "p50_ms": 10.0}, {"batch": 2, "p50_ms": 12.0},
    ...          {"batch": 4, "p50_ms": 20.0}, {"batch": 8, "p50_ms": 38.0}]
    >>> recommend_batching(curve, cores=2)
    {'max_batch_size': 4, 'allowed_batch_sizes': [1, 2, 4], 'batch_timeout_micros': 5000, \
'num_batch_threads': 2, 'max_enqueued_batches': 100}
    """
    if not curve:
        raise ValueError("Expected a non-empty `curve` (measure_batching's list).")
    throughput = [row["batch"] / row["p50_ms"] * 1000 for row in curve]
    best = len(curve) - 1
    for i in range(len(curve) - 1):
        if throughput[i + 1] < MIN_GAIN * throughput[i]:
            best = i
            break
    cores = cores or os.cpu_count() or 1
    max_batch = curve[best]["batch"]
    per_second_batches = throughput[best] / max_batch
    return {
        "max_batch_size": max_batch,
        "allowed_batch_sizes": [row["batch"] for row in curve[: best + 1]],
        "batch_timeout_micros": max(100, int(round(curve[0]["p50_ms"] * 5)) * 100),
        "num_batch_threads": cores,
        "max_enqueued_batches": max(100, int(np.ceil(per_second_batches))),
    }
