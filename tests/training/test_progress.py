"""`RunProgress` and `heartbeat`: progress counted over the run's steps, plain lines off a
terminal (no carriage returns, no colour codes), a bar on one, and a line at least every
`every` seconds while a stage runs long."""

import io
import time

import keras
import numpy as np
import pytest

from keras_attn.training import RunProgress
from keras_attn.training.progress import clock, heartbeat, job_stage


def _fit(progress, epochs=2, initial_steps=0):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse", metrics=["mae"])
    model.optimizer.build(model.trainable_variables)
    model.optimizer.iterations.assign(initial_steps)  # a resumed run's step
    x, y = np.ones((8, 2)), np.ones(8)
    model.fit(
        x, y, batch_size=2, epochs=epochs, validation_data=(x, y), verbose=0, callbacks=[progress]
    )


def test_plain_lines_count_the_runs_steps_with_the_epochs_metrics():
    out = io.StringIO()
    _fit(RunProgress(20, bar=False, stream=out), initial_steps=12)  # resumed at 12 of 20
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert lines[0].startswith("step 13/20 (65%, ") and " left): loss " in lines[0]
    assert lines[1].startswith("epoch 1 (step 16/20): loss ") and "val_mae " in lines[1]
    assert lines[-2].startswith("step 20/20 (100%, ") and " in all): " in lines[-2]
    assert len(lines) == 4  # a fast run: the first step, the last, the two epochs


def test_a_bar_on_a_terminal_counts_from_the_resumed_step():
    out = io.StringIO()
    progress = RunProgress(20, bar=True, stream=out)
    _fit(progress, initial_steps=12)
    text = out.getvalue()
    assert "20/20" in text and "12/20" in text and "step/s" in text
    assert "epoch 2 (step 20/20)" in text  # epoch lines printed above the bar
    assert progress.stage == "after step 20: the final validation, saving"


def test_the_heartbeat_speaks_when_nothing_else_did():
    out = io.StringIO()
    stage = {"now": "exporting"}
    with heartbeat(lambda: stage["now"], every=0.2, stream=out):
        time.sleep(0.5)
        stage["now"] = "checking"
        time.sleep(0.35)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and lines[0].startswith("  ... exporting (0:00 since the start)")
    assert lines[-1].startswith("  ... checking")
    quiet = io.StringIO()
    with heartbeat("quick", every=60, stream=quiet):
        time.sleep(0.1)
    assert quiet.getvalue() == ""


def test_a_job_stage_heads_its_lines_and_ends_with_it():
    out = io.StringIO()
    began = time.monotonic() - 75
    with job_stage(2, 4, "Fine-tuning", began, stream=out):
        _fit(RunProgress(8, bar=False, stream=out), epochs=1)
        with heartbeat("exporting", every=0.2, stream=out):
            time.sleep(0.3)
    _fit(RunProgress(4, bar=False, stream=out), epochs=1)  # after the job's stage: plain
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["", "== 2/4 Fine-tuning (job 1:15 so far) =="]
    assert lines[2].startswith("[2/4] step 1/8 (12%, ")
    assert lines[3].startswith("[2/4] epoch 1 (step 4/8): ")
    assert lines[4].startswith("[2/4] ... exporting (0:00 since the start)")
    assert lines[-3].startswith("step 1/4 (25%, ") and lines[-1].startswith("epoch 1 (")
    bar = io.StringIO()
    with job_stage(1, 2, "Pre-training", time.monotonic(), stream=bar):
        _fit(RunProgress(4, bar=True, stream=bar), epochs=1)
    assert bar.getvalue().startswith("== 1/2 Pre-training (job 0:00 so far) ==\n")
    assert "[1/2]: " in bar.getvalue() and "[1/2] epoch 1 (step 4/4)" in bar.getvalue()
    with pytest.raises(ValueError, match="1 <= index <= total.*index=5, total=4"):
        with job_stage(5, 4, "Nothing", began):
            pass


def test_clock_and_bad_arguments():
    assert (clock(75.2), clock(3725)) == ("1:15", "1:02:05")
    with pytest.raises(ValueError, match="`total_steps` an int >= 1.*total_steps=0"):
        RunProgress(0)
    with pytest.raises(ValueError, match="`every` seconds > 0.*every=-1"):
        RunProgress(10, every=-1)


def test_train_refuses_an_unknown_verbosity(tmp_path):
    from keras_attn.training import TrainingConfig, load_config, train

    run = load_config({"training": TrainingConfig})
    with pytest.raises(ValueError, match="`verbose` 0, 1, 2 or 'auto'.*verbose=3"):
        train(object(), run, tmp_path, verbose=3)
