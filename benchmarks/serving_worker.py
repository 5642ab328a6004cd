"""One runtime of `benchmarks/serving.py --against`, in a process of its own (the
Optimum rows in their own virtual environments): loads an export, then answers
requests read as JSON lines on stdin, timing each call from the raw texts to the
label ids (tokenisation inside).

    python benchmarks/serving_worker.py KIND PATH --threads 2 [--hf FOLDER --int8]

KIND: `saved_model` (run as TF Serving runs it: the MetaGraph in a Session), `onnx`,
`openvino` (float32), `openvino-default` (the CPU plugin's own precision), `litert`
(ours, raw text in), `optimum-onnxruntime`,
`optimum-openvino` (PATH: the Optimum export, written first from the Hugging Face
folder `--hf` as their users write it: `optimum-cli export ...`, int8 by their
recipe). Requests: `{"texts": [...]}` -> `{"ms": float, "label_ids": [...]}`.
This file imports nothing of keras_attn: it runs where keras_attn is not installed.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np


def _run(command):
    """Runs `command`, its output kept off stdout (the answers' channel); shown on failure."""
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode:
        sys.stderr.write(done.stdout[-5000:])
        raise SystemExit(f"{' '.join(command[:3])} failed ({done.returncode})")


def optimum_export(kind, hf, path, int8, max_length):
    """The Optimum export of `hf` into `path`, as `optimum-cli` writes it; int8: ONNX
    Runtime's dynamic quantization for AVX-512 VNNI (Optimum's CPU recipe), OpenVINO's
    8-bit weights (`--weight-format int8`)."""
    cli = str(pathlib.Path(sys.executable).with_name("optimum-cli"))
    if kind == "optimum-openvino":
        command = [cli, "export", "openvino", "--model", str(hf), "--task", "text-classification"]
        if int8:
            command += ["--weight-format", "int8"]
        _run([*command, str(path)])
        return
    float_path = path.with_name(path.name + "-float") if int8 else path
    command = [cli, "export", "onnx", "--model", str(hf), "--task", "text-classification"]
    _run([*command, str(float_path)])
    if int8:
        from optimum.onnxruntime import ORTQuantizer
        from optimum.onnxruntime.configuration import AutoQuantizationConfig

        quantizer = ORTQuantizer.from_pretrained(float_path)
        config = AutoQuantizationConfig.avx512_vnni(is_static=False, per_channel=False)
        quantizer.quantize(save_dir=path, quantization_config=config)
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt"):
            if (float_path / name).is_file() and not (path / name).is_file():
                (path / name).write_bytes((float_path / name).read_bytes())


def litert(path, threads):
    """The `serving_default` runner of a LiteRT export: ai-edge-litert's interpreter with
    TensorFlow Text's operators, loaded as a user's service loads them (docs/deployment.md:
    TensorFlow's framework library for the kernels' links, no TensorFlow import)."""
    import ctypes
    import importlib.machinery
    import importlib.util

    from ai_edge_litert import interpreter

    spec = {n: importlib.util.find_spec(n) for n in ("tensorflow", "tensorflow_text")}
    root = {n: pathlib.Path(s.submodule_search_locations[0]) for n, s in spec.items()}
    framework = root["tensorflow"] / "libtensorflow_framework.so.2"
    ctypes.CDLL(str(framework), mode=ctypes.RTLD_GLOBAL)
    library = root["tensorflow_text"] / "core" / "pybinds" / "tflite_registrar.so"
    loader = importlib.machinery.ExtensionFileLoader("tflite_registrar", str(library))
    spec = importlib.util.spec_from_loader("tflite_registrar", loader)
    ops = importlib.util.module_from_spec(spec)
    loader.exec_module(ops)
    registrars = [ops.AddFastBertNormalize, ops.AddFastWordpieceTokenize]
    loaded = interpreter.InterpreterWithCustomOps(
        model_path=str(path),
        custom_op_registerers=[*registrars, ops.AddRaggedTensorToTensor],
        num_threads=threads,
    )
    return loaded.get_signature_runner("serving_default")


def saved_model_session(path, threads, outputs=None):
    """`run(texts, **session_run_options) -> {output: array}`: `serving_default` run as
    TF Serving runs it: the MetaGraph loaded into a Session (`SavedModelBundle`: Grappler's
    optimisations at the session's creation, the signature's tensors fed and fetched by
    name), `threads` for its intra- and inter-op pools; `outputs` the names fetched
    (default: every output)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the tokenizer's ops, as TF Serving links them)

    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads
    )
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph, config=config)
    with graph.as_default():
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(path))
    signature = meta_graph.signature_def["serving_default"]
    feed = signature.inputs["text"].name
    fetches = {n: t.name for n, t in signature.outputs.items() if outputs is None or n in outputs}
    return lambda texts, **options: session.run(fetches, {feed: texts}, **options)


def load(kind, path, threads, max_length):
    """`predict(texts) -> label ids` of the export at `path`."""
    if kind == "saved_model":
        run = saved_model_session(path, threads, outputs=("label_ids",))
        return lambda texts: run(texts)["label_ids"]
    if kind == "onnx":
        import onnxruntime
        import onnxruntime_extensions

        options = onnxruntime.SessionOptions()
        options.register_custom_ops_library(onnxruntime_extensions.get_library_path())
        options.intra_op_num_threads = options.inter_op_num_threads = threads
        session = onnxruntime.InferenceSession(str(path), options)
        return lambda texts: session.run(["label_ids"], {"text": np.array(texts, object)})[0]
    if kind == "litert":
        runner = litert(path, threads)
        return lambda texts: runner(text=np.array([t.encode() for t in texts], object))["label_ids"]
    if kind.startswith("openvino"):
        import openvino
        import openvino_tokenizers  # noqa: F401

        config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads}
        if kind == "openvino-default":  # the plugin's own precision (bfloat16 with AMX)
            del config["INFERENCE_PRECISION_HINT"]
        compiled = openvino.Core().compile_model(str(path), "CPU", config)
        return lambda texts: compiled(np.array(texts))["label_ids"]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if kind == "optimum-onnxruntime":
        import onnxruntime
        from optimum.onnxruntime import ORTModelForSequenceClassification

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = threads
        files = sorted(p.name for p in pathlib.Path(path).glob("*.onnx"))
        model = ORTModelForSequenceClassification.from_pretrained(
            path, file_name=files[0], session_options=options
        )
    else:
        from optimum.intel import OVModelForSequenceClassification

        model = OVModelForSequenceClassification.from_pretrained(
            path, ov_config={"INFERENCE_NUM_THREADS": threads}
        )

    def predict(texts):
        encoded = tokenizer(
            texts, padding=True, truncation=True, max_length=max_length, return_tensors="np"
        )
        return np.argmax(model(**encoded).logits, axis=-1)

    return predict


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind")
    parser.add_argument("path", type=pathlib.Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--hf", type=pathlib.Path, help="Optimum rows: the folder to export")
    parser.add_argument("--int8", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.hf is not None:
        optimum_export(args.kind, args.hf, args.path, args.int8, args.max_length)
    predict = load(args.kind, args.path, args.threads, args.max_length)
    files = [args.path] if args.path.is_file() else list(args.path.rglob("*"))
    if args.kind.startswith("openvino"):
        files.append(args.path.with_suffix(".bin"))
    size = sum(f.stat().st_size for f in files if f.is_file() and "-float" not in str(f))
    print(json.dumps({"ready": True, "mib": size / 2**20}), flush=True)
    for line in sys.stdin:
        texts = json.loads(line)["texts"]
        began = time.perf_counter()
        label_ids = predict(texts)
        ms = (time.perf_counter() - began) * 1000
        print(json.dumps({"ms": ms, "label_ids": np.asarray(label_ids).tolist()}), flush=True)


if __name__ == "__main__":
    main()
