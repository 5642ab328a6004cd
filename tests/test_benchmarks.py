"""The benchmarks run, at toy sizes, and time what their labels say.

No figure is checked here (speed is the benchmarks' business, not the tests'): these
tests keep the scripts working and their variants honest, e.g. a "no XLA" variant
must not reuse a function compiled with XLA.
"""

import importlib
import importlib.util
import pathlib

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def benchmark(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # they import benchmarks/timing.py
    return importlib.import_module


def test_timing_alternates_the_calls_and_takes_medians(benchmark):
    timing = benchmark("timing")
    order = []
    medians = timing.alternating_medians(
        {"a": lambda: order.append("a"), "b": lambda: order.append("b")}, repeats=3, warmup=2
    )
    assert order == ["a", "a", "b", "b"] + ["a", "b"] * 3
    assert set(medians) == {"a", "b"} and all(m >= 0 for m in medians.values())


def test_attention_benchmark_runs(benchmark):
    rows = benchmark("attention").main(
        [
            "--seq-lengths",
            "8",
            "--batch-size",
            "2",
            "--hidden-dim",
            "16",
            "--num-heads",
            "2",
            "--repeats",
            "2",
            "--warmup",
            "1",
        ]
    )
    assert [(seq, jit) for seq, jit, *_ in rows] == [(8, False), (8, True)]
    assert all(ours > 0 and keras > 0 for _, _, ours, keras, _ in rows)


# Both benchmarks at toy sizes in one process on the backend (Keras starts on it).
ON_A_BACKEND = """
import json, attention, bert
print(json.dumps({
    "attention": attention.main(["--seq-lengths", "8", "--batch-size", "2", "--hidden-dim",
                                 "16", "--num-heads", "2", "--repeats", "2", "--warmup", "1"]),
    "bert": bert.main(["--preset", "tiny", "--vocabulary-size", "200", "--sequence-length",
                       "16", "--batch-size", "2", "--predictions", "3", "--repeats", "2",
                       "--warmup", "1"]),
}))
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.slow
def test_attention_and_bert_benchmarks_run_on_every_backend(backend):
    """JAX (compiled) and PyTorch (eager), each in a process of its own."""
    import json
    import os
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-c", ON_A_BACKEND],
        cwd=BENCHMARKS,
        env={**os.environ, "KERAS_BACKEND": backend},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.count(f"on {backend} ") == 2
    rows = json.loads(completed.stdout.strip().splitlines()[-1])
    compiled = backend == "jax"
    assert [(seq, jit) for seq, jit, *_ in rows["attention"]] == [(8, compiled)]
    assert all(ours > 0 and keras > 0 for _, _, ours, keras, _ in rows["attention"])
    assert [row[0] for row in rows["bert"]] == [compiled]
    assert all(0 < mfu["ours"] < 1 and 0 < mfu["keras-hub"] < 1 for *_, mfu in rows["bert"])


@pytest.mark.slow
def test_bert_benchmark_runs(benchmark):
    rows = benchmark("bert").main(
        [
            "--preset",
            "tiny",
            "--vocabulary-size",
            "200",
            "--sequence-length",
            "16",
            "--batch-size",
            "2",
            "--predictions",
            "3",
            "--repeats",
            "2",
            "--warmup",
            "1",
        ]
    )
    assert [row[0] for row in rows] == [False, True]
    assert all(ours > 0 and theirs > 0 for _, ours, theirs, _, _ in rows)
    assert all(0 < mfu["ours"] < 1 and 0 < mfu["keras-hub"] < 1 for *_, mfu in rows)


def test_bert_training_flops_count_every_matrix_product(benchmark):
    import argparse

    bert = benchmark("bert")
    args = argparse.Namespace(
        preset="tiny", sequence_length=16, batch_size=2, predictions=3, vocabulary_size=200
    )
    size = bert.BERT_SIZES["tiny"]
    d, layers = size["hidden_dim"], size["num_layers"]
    # Written out per matrix product, forward: q, k, v, o; the two feed-forward layers
    # (4d wide); q.k and alpha.v; then the head's transform and vocabulary projection.
    forward = 0
    for _ in range(layers):
        forward += 4 * (2 * 32 * d * d)  # 32 tokens through each projection
        forward += 2 * (2 * 32 * d * 4 * d)
        forward += 2 * (2 * 2 * 16 * 16 * d)  # per sequence: (16 x d) by (d x 16), twice
    forward += 2 * 6 * d * d + 2 * 6 * d * 200
    assert bert.training_flops(args) == 3 * forward


@pytest.mark.slow
def test_decode_benchmark_compiles_keras_hub_as_labelled(benchmark, monkeypatch):
    import keras_hub

    made = []
    original = keras_hub.models.GPT2CausalLM.make_generate_function

    def recording(self):
        function = original(self)
        made.append((self.jit_compile, getattr(function, "_jit_compile", None)))
        return function

    monkeypatch.setattr(keras_hub.models.GPT2CausalLM, "make_generate_function", recording)
    rows = benchmark("decode").main(
        [
            "--layers",
            "1",
            "--hidden-dim",
            "16",
            "--heads",
            "2",
            "--vocabulary-size",
            "50",
            "--batch-size",
            "2",
            "--new-tokens",
            "8",
            "--repeats",
            "1",
        ]
    )
    assert [(model, jit) for model, jit, *_ in rows] == [
        ("GPT", True),
        ("seq2seq", True),
        ("GPT", False),
        ("seq2seq", False),
    ]
    # keras-hub's generate function, as it was compiled for each setting: XLA, then not.
    assert sorted(set(made), reverse=True) == [(True, True), (False, False)]


@pytest.mark.slow
def test_serving_benchmark_runs(benchmark, tmp_path):
    """Tiny runs of the teacher and student shapes (the packaged vocabulary), 40 snippets:
    every variant is served, keras-hub's twin computes what our fixed-length export does."""

    from keras_attn.models import BertBackbone, BertClassifier, student_from_teacher

    teacher = BertClassifier(
        BertBackbone.from_size("tiny", vocabulary_size=30522, max_sequence_length=64),
        num_classes=2,
        pooling="mean",
    )
    for name, model in (("teacher", teacher), ("student", student_from_teacher(teacher, 1))):
        (tmp_path / name).mkdir()
        model.save(tmp_path / name / "model.keras")
    flags = ["--teacher", str(tmp_path / "teacher"), "--student", str(tmp_path / "student")]
    flags += ["--texts", "40", "--sequence-length", "64", "--calls", "2", "--batch-calls", "1"]
    rows = benchmark("serving").main(flags + ["--warmup", "1"])
    names = ["ours fixed", "ours", "ours int8", "student", "student int8", "keras-hub"]
    assert [row["variant"] for row in rows] == names
    by_name = {row["variant"]: row for row in rows}
    # The same function as keras-hub's on every snippet: weights, GELU and head copied.
    assert by_name["ours fixed"]["same_as_keras_hub"] == by_name["ours"]["same_as_keras_hub"] == 40
    assert by_name["keras-hub"][1]["p50_over_keras_hub"] == 1.0
    assert all(row[batch]["p50"] > 0 for row in rows for batch in (1, 32))
    assert by_name["ours int8"]["weights_mib"] < 0.5 * by_name["ours"]["weights_mib"]


@pytest.mark.slow
def test_serving_against_runtimes_runs_every_format_in_its_own_process(benchmark, tmp_path):
    """`--against ""`: our formats alone (the Optimum rows need `make optimum-venvs`), a
    tiny classifier's run folder, 24 snippets: every worker answers with the
    SavedModel's labels; a missing Optimum environment is one error line."""
    import yaml

    from keras_attn.data.wordpiece_tokenizer import write_vocabulary
    from keras_attn.models import BertBackbone, BertClassifier

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz"]
    write_vocabulary(vocabulary, tmp_path / "vocab.txt")
    backbone = BertBackbone.from_size("tiny", vocabulary_size=31, max_sequence_length=32)
    BertClassifier(backbone, num_classes=2).save(tmp_path / "model.keras")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"sequence_length": 32}}))
    flags = ["--run", str(tmp_path), "--texts", "24", "--calls", "2", "--batch-calls", "1"]
    rows = benchmark("serving").main(["--against", "", *flags, "--warmup", "1"])
    names = ["SavedModel", "SavedModel bfloat16", "SavedModel int8", "ONNX", "ONNX int8"]
    names += ["OpenVINO", "OpenVINO, plugin precision", "LiteRT", "LiteRT int8"]
    assert [row["export"] for row in rows] == [f"ours {n}" for n in names]
    assert all(row["same"] == 24 and row["p50@1"] > 0 and row["p99@32"] > 0 for row in rows)
    serving_runtimes = benchmark("serving_runtimes")
    missing = {"openvino": tmp_path / "no-venv"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(serving_runtimes, "OPTIMUM_VENVS", missing)
        with pytest.raises(SystemExit, match="no-venv missing: run `make optimum-venvs`"):
            benchmark("serving").main(["--against", "openvino", *flags])


@pytest.mark.slow  # 20 s: an export, then a process that profiles it
def test_serving_profile_times_and_splits_a_served_request(benchmark, tmp_path, capfd):
    from keras_attn.data import WordPieceTokenizer
    from keras_attn.export import export_saved_model
    from keras_attn.models import BertBackbone, BertClassifier

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz"]
    backbone = BertBackbone.from_size("tiny", vocabulary_size=31, max_sequence_length=32)
    path = export_saved_model(
        BertClassifier(backbone, num_classes=2), WordPieceTokenizer(vocabulary, sequence_length=32),
        tmp_path / "1", warmup=False,
    )  # fmt: skip
    benchmark("serving_profile").main([str(path), "--calls", "3", "--traces", "1"])
    out = capfd.readouterr().out
    assert "batch 1: p50" in out and "batch 32: p50" in out
    assert out.count("ops ran") == 2 and "tokenizer and packing" in out and "model" in out
    assert "MatMul" in out  # the products are among the op types


@pytest.mark.slow
def test_windowed_attention_benchmark_runs(benchmark):
    rows = benchmark("windowed_attention").main(["--lengths", "64", "--repeats", "1"])
    (row,) = rows
    assert row["length"] == 64 and row["full"] is not None
    for variant in ("window", "full"):
        assert row[variant]["seconds"] > 0 and row[variant]["memory_mib"] >= 0


def test_decode_benchmark_measures_grouped_query_caches(benchmark):
    flags = "--layers 1 --hidden-dim 32 --heads 8 --vocabulary-size 50 --batch-size 2"
    rows = benchmark("decode").main(
        [*flags.split(), "--new-tokens", "8", "--repeats", "1", "--grouped-query"]
    )
    assert [k for k, *_ in rows] == [8, 2, 1]
    # (batch 2, keys and values, 16 positions, K heads, 4 dims) float32, one layer
    assert [cache_bytes for *_, cache_bytes in rows] == [2 * 2 * 16 * k * 4 * 4 for k in (8, 2, 1)]
    assert all(seconds > 0 for _, seconds, _ in rows)


@pytest.mark.slow  # 25 s: five decoders compiled or loaded
def test_decode_benchmark_times_a_gguf_decoder_against_transformers(benchmark, tmp_path):
    """`--gguf FILE`: a small random Llama with its tokenizer, written by `gguf`'s writer,
    decoded by ours (float32, int8, int8 weights only), by `transformers` reading the
    same file and, where `llama-cpp-python` is installed, by llama.cpp (batch 2: its
    batched decoding); a missing file is one error line."""
    from tests.models.llama.gguf_files import byte_level_bpe_metadata, write_llama_gguf

    metadata, _ = byte_level_bpe_metadata()
    path = tmp_path / "tiny.gguf"
    write_llama_gguf(path, vocabulary=len(metadata["token_list"]), tokenizer=metadata)
    flags = ["--prompt-tokens", "8", "--new-tokens", "4", "--batch-sizes", "1", "2"]
    rows = benchmark("decode").main(["--gguf", str(path), *flags, "--repeats", "1"])
    expected = ["ours float32", "ours int8", "ours int8 weights only"]
    expected += ["transformers float32", "transformers int8"]
    if importlib.util.find_spec("llama_cpp") is not None:  # batched: one context, 2 sequences
        expected.append("llama.cpp (file's 4-bit)")
    assert [row["variant"] for row in rows if row["batch"] == 2] == expected
    assert all(row["tokens_per_second"] > 0 for row in rows)
    assert all(0 <= row["same_as_float32"] <= 1 for row in rows)
    assert all(row["same_as_float32"] == 1 for row in rows if row["variant"].endswith("float32"))
    with pytest.raises(SystemExit, match="--gguf .*nothing.gguf: no such file"):
        benchmark("decode").main(["--gguf", str(tmp_path / "nothing.gguf")])


@pytest.mark.slow
def test_lora_benchmark_times_both_and_measures_memory_in_fresh_processes(benchmark):
    rows = benchmark("lora").main(
        ["--batch-size", "2", "--sequence-length", "8", "--repeats", "1", "--steps", "1"]
        + ["--layers", "1"]
    )
    assert [method for method, *_ in rows] == ["full", "lora"]
    (_, _, _, _, full), (_, _, _, _, lora) = rows
    assert lora < 0.03 * full  # adapters and the head, against every weight
    assert all(seconds > 0 and peak > 0 and before > 0 for _, seconds, peak, before, _ in rows)
    # LoRA's training peak below full fine-tuning's. (Not above its own resident size
    # before the first step: the allocator may give back the compilation's memory, and a
    # fresh process ran LoRA's one step at 1,133 MiB after holding 1,149.)
    assert rows[1][2] < rows[0][2]


@pytest.mark.slow  # 10-12 s: out of `make test-fast`
def test_model_parallel_benchmark_measures_the_shards_a_device_holds():
    """In a process of its own: the host device count is read when JAX starts."""
    import json
    import os
    import subprocess
    import sys

    code = (
        "import json, model_parallel; "
        "print(json.dumps(model_parallel.main(['--devices', '4', '--models', 'bert-tiny'])))"
    )
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(BENCHMARKS.parent))
    env.pop("XLA_FLAGS", None)
    process = subprocess.run(
        [sys.executable, "-c", code], cwd=BENCHMARKS, env=env, capture_output=True, text=True
    )
    assert process.returncode == 0, process.stderr[-3000:]
    (row,) = json.loads(process.stdout.strip().splitlines()[-1])
    assert row["model"] == "bert-tiny" and row["devices"] == 4 and row["split_variables"] > 0
    # Every kernel and table split 4 ways; norms, biases and positions' rest whole.
    assert 0.25 < row["ratio"] < 0.4, row


@pytest.mark.slow
def test_strings_benchmark_times_fit_on_strings_against_token_ids(benchmark, tmp_path):
    rows = benchmark("strings").main(
        ["--layers", "1", "--sequence-length", "16", "--batch-size", "4", "--steps", "4"]
        + ["--repeats", "1", "--json", str(tmp_path / "rows.json")]
    )
    assert [path for path, *_ in rows] == ["token ids", "strings"]
    assert rows[0][2] == 1.0 and all(rate > 0 for _, rate, _ in rows)
    import json

    written = json.loads((tmp_path / "rows.json").read_text())
    assert [row["path"] for row in written] == ["token ids", "strings"]
