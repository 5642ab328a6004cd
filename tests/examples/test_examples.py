"""Every example runs with `--smoke` from a fresh checkout.

Each runs in the test's process (its `main(argv)`, in a temporary working folder), which
saves a TensorFlow start per example; the command line itself is covered by
`test_an_example_runs_as_a_script`."""

import contextlib
import importlib.util
import json
import pathlib
import subprocess
import sys

import keras
import pytest

from tests import helpers

EXAMPLES = sorted((pathlib.Path(__file__).parents[2] / "examples").glob("*.py"))
# Examples whose smoke runs in a test of its own (with an option the plain smoke lacks:
# it covers the plain one's path too), or in tests/training/test_strategy.py.
TESTED_ELSEWHERE = {
    "distributed_training.py",
    "pretrain_bert.py",
    "electra_remedies.py",
    "feature_based_vs_finetuning.py",
}


# One example runs its smoke test on a step budget (`--steps N`, what the README's
# reproductions use): exactly N steps, whatever the machine's speed.
STEP_BUDGET = {"gpt_generate.py": ["--steps", "2"]}
# Arguments that keep a smoke run to one arm where every arm is the same code (each
# objective's command is tested on its own in tests/training; full fine-tuning's in
# tests/training/test_trainer.py and the LoRA benchmark's test).
SMOKE_ARGS = {
    "albert_sharing.py": ["--modes", "attention"],
    "electra_vs_bert.py": ["--objectives", "xlnet"],
    "lora_vs_full.py": ["--methods", "lora"],
    # The other arms are these networks with other entity vectors, or no network.
    "ernie_typing.py": ["--arms", "text", "ernie_transe", "majority"],
    "kagnet_hypernyms.py": ["--arms", "paths", "--splits", "answers"],
}
# Smoke runs that take a few steps per model run eagerly (`tf.function`s as Python): there
# tracing the train, test and predict steps is most of the time (getting_started.py:
# 87 s traced, 25 s eager, 2 cores). The graph path of what they call is the library's,
# tested traced in tests/training and tests/export; examples with layers or `tf.function`s
# of their own (show_attend_tell.py, bahdanau_rnn_translation.py) and those whose smoke
# takes many steps (eager steps cost more there than a trace) stay traced.
EAGER = {
    "custom_model_with_attention_layers.py",
    "deberta_vs_bert.py",
    "distill_minilm.py",
    "ernie_typing.py",
    "few_shot_in_context.py",
    "finetune_bert_sentiment.py",
    "getting_started.py",
    "gpt1_auxiliary_loss.py",
    "kagnet_hypernyms.py",
    "bert_ner.py",
    "transe_wordnet.py",
    "transformer_xl_kjv.py",
    "translate_transformer.py",
}


def run_example(name, argv, folder, monkeypatch, capsys, eagerly=False):
    """`python examples/<name> <argv>` run in this process from `folder` (`eagerly`:
    with `tf.config.run_functions_eagerly`); its stdout."""
    monkeypatch.chdir(folder)
    script = EXAMPLES[0].parent / name
    spec = importlib.util.spec_from_file_location(f"example_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    try:
        with helpers.eagerly() if eagerly else contextlib.nullcontext():
            spec.loader.exec_module(module)
            module.main(argv)
    finally:  # what an example may leave behind for the next test in this process
        keras.config.set_dtype_policy("float32")
        keras.backend.clear_session()
    return capsys.readouterr().out


@pytest.mark.parametrize(
    "script", [p for p in EXAMPLES if p.name not in TESTED_ELSEWHERE], ids=lambda p: p.name
)
@pytest.mark.slow
def test_example_runs_with_smoke(script, tmp_path, monkeypatch, capsys):
    argv = ["--smoke", *STEP_BUDGET.get(script.name, []), *SMOKE_ARGS.get(script.name, [])]
    eagerly = script.name in EAGER
    out = run_example(script.name, argv, tmp_path, monkeypatch, capsys, eagerly=eagerly)
    assert out.strip(), "an example should print what it found"
    if script.name in STEP_BUDGET:
        assert f"({STEP_BUDGET[script.name][1]} steps)" in out


@pytest.mark.slow
def test_an_example_runs_as_a_script():
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES[0].parent / "gpt_generate.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0 and "--steps" in completed.stdout, completed.stderr[-3000:]


def test_every_example_quiets_tensorflow_before_it_starts():
    """An example is a command (the README's figures run them): like `keras-attn`'s, its
    output has no TensorFlow C++ notices (oneDNN's "DT_INT64 only on platforms with
    AVX-512" line at the first fine-tuning step), so `quiet_command_line()` runs before
    anything imports TensorFlow."""
    for script in EXAMPLES:
        lines = script.read_text(encoding="utf-8").splitlines()
        quiet = lines.index(
            "quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands"
        )
        starts = [
            number for number, line in enumerate(map(str.strip, lines))
            if line.startswith(("import keras", "import tensorflow", "from keras ", "from tensorf"))
            or (line.startswith("from keras_attn.") and "native_logs" not in line)
        ]  # fmt: skip
        assert starts and quiet < min(starts), script.name


@pytest.mark.slow
def test_pretraining_example_with_static_masking(tmp_path, monkeypatch, capsys):
    out = run_example(
        "pretrain_bert.py",
        ["--smoke", "--static-masking", "2", "--logdir", str(tmp_path)],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert "Static masking: 2 x" in out
    assert len(list((tmp_path / "tfrecords").glob("pretraining-*-of-00004.tfrecord"))) == 4


@pytest.mark.parametrize("flags", [["--steps", "0"], ["--minutes", "-1"]])
def test_bad_budget_flags_stop_at_once(flags, tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as stopped:
        run_example("gpt_generate.py", flags, tmp_path, monkeypatch, capsys)
    assert stopped.value.code == 2
    assert "--steps and --minutes must be positive" in capsys.readouterr().err


@pytest.mark.slow
def test_translation_example_with_predictive_local_attention(tmp_path, monkeypatch, capsys):
    out = run_example(
        "bahdanau_rnn_translation.py",
        ["--smoke", "--attention", "local-p", "--logdir", str(tmp_path)],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert "local-p attention: trained" in out
    assert (tmp_path / "alignment.png").stat().st_size > 0


@pytest.mark.slow
def test_electra_remedies_draws_finished_runs(tmp_path, monkeypatch, capsys):
    """`--from-runs` reads a run's held-out curves back from its TensorBoard logs."""
    run_example("electra_remedies.py", ["--smoke", "--variants", "warm_start"], tmp_path,
                monkeypatch, capsys)  # fmt: skip
    run = tmp_path / "runs" / "electra_remedies" / "warm_start-0"
    figure = tmp_path / "curves.png"
    out = run_example(
        "electra_remedies.py",
        ["--from-runs", f"warm_start={run}", "--figure", str(figure)],
        tmp_path,
        monkeypatch,
        capsys,
    )
    printed = json.loads(out.strip().splitlines()[-1])
    assert printed["run"] == "warm_start" and printed["step"] == 4
    assert 0.0 <= printed["val_rtd_auc"] <= 1.0 and figure.stat().st_size > 1000


@pytest.mark.slow
def test_feature_based_example_trains_taggers_again_on_its_finished_runs(
    tmp_path, monkeypatch, capsys
):
    args = ["--smoke", "--pretrain-steps", "3", "2"]  # steps given: no step timing
    out = run_example("feature_based_vs_finetuning.py", args, tmp_path, monkeypatch, capsys)
    assert "pre-training steps given" in out
    first = json.loads((tmp_path / "runs" / "feature_based" / "results.json").read_text())
    assert [(row["part"], row.get("pretrain_steps")) for row in first] == [
        ("minilm", None),
        ("kjv", 3),
        ("kjv", 2),
    ]
    out = run_example(
        "feature_based_vs_finetuning.py",
        ["--smoke", "--parts", "kjv", "--reuse-pretraining"],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert "minutes of pre-training" not in out  # neither timed nor pre-trained again
    again = json.loads((tmp_path / "runs" / "feature_based" / "results.json").read_text())
    assert [(r["arm"], r["pretrain_steps"]) for r in again] == [
        (r["arm"], r["pretrain_steps"]) for r in first[1:]
    ]
    assert all(r["pretrain_minutes"] is None and r["pretrain_accuracy"] for r in again)
    assert all(0 <= r["train_entity_f1"] <= 1 for r in again)
    with pytest.raises(SystemExit):  # argparse's error: two positive counts
        run_example(
            "feature_based_vs_finetuning.py",
            ["--smoke", "--pretrain-steps", "0", "5"],
            tmp_path,
            monkeypatch,
            capsys,
        )
    assert "--pretrain-steps: two positive counts" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no finished run"):
        run_example(
            "feature_based_vs_finetuning.py",
            ["--smoke", "--parts", "kjv", "--reuse-pretraining", "--seeds", "7"],
            tmp_path,
            monkeypatch,
            capsys,
        )
