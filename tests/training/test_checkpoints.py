"""Checkpoints: atomic writes, keep-N/best, and a SIGKILLed run that resumes exactly."""

import os
import signal
import time

import keras
import numpy as np
import pytest

from keras_attn.training import RunCheckpoint, restore_latest
from keras_attn.training.checkpoints import checkpoints, load_state, save_state
from tests.training.runs import (
    final_weights,
    keras_attn_command,
    pretrain_args,
    run_keras_attn,
    write_corpus,
)


def _model(dropout=0.5):
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8),
            keras.layers.Dropout(dropout),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.AdamW(1e-2), "mse")
    return model


def test_state_round_trip_includes_optimizer_and_dropout_seeds(tmp_path):
    x, y = np.random.rand(32, 4), np.random.rand(32)
    model = _model()
    model.fit(x, y, batch_size=8, verbose=0)
    save_state(model, tmp_path / "s.npz", {"step": 4})
    expected = [v.numpy() for v in model.variables + model.optimizer.variables]
    model.fit(x, y, batch_size=8, verbose=0)  # moves weights, moments, seed states, iterations
    assert load_state(model, tmp_path / "s.npz") == {"step": 4}
    restored = [v.numpy() for v in model.variables + model.optimizer.variables]
    assert any("seed_generator" in v.path for v in model.variables)
    for a, b in zip(expected, restored, strict=True):
        np.testing.assert_array_equal(a, b)


def test_mismatched_checkpoint_is_refused(tmp_path):
    model = _model()
    model.fit(np.ones((8, 4)), np.ones(8), verbose=0)
    save_state(model, tmp_path / "s.npz", {"step": 1})
    other = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dropout(0.5), keras.layers.Dense(1)]
    )
    other.compile(keras.optimizers.AdamW(1e-2), "mse")
    with pytest.raises(ValueError, match="does not fit"):
        load_state(other, tmp_path / "s.npz")


def test_keeps_last_n_and_best_and_ignores_partial_writes(tmp_path):
    model = _model()
    (tmp_path / ".ckpt-00000099.npz.tmp-1").write_bytes(b"half a file")  # a write killed midway
    callback = RunCheckpoint(tmp_path, every=2, keep=2, monitor="val_loss")
    x, y = np.random.rand(16, 4), np.random.rand(16)
    model.fit(x, y, batch_size=4, epochs=3, validation_data=(x, y), callbacks=[callback], verbose=0)
    assert [step for step, _ in checkpoints(tmp_path)] == [10, 12]
    assert (tmp_path / "best.npz").exists() and callback.best is not None
    assert not list(tmp_path.glob(".*.tmp-*"))
    assert restore_latest(_model(), tmp_path) == 12


def test_a_damaged_newest_checkpoint_resumes_from_the_one_before(tmp_path):
    from keras_attn.errors import UserInputError

    rng = np.random.default_rng(0)
    x, y = rng.random((16, 4), "float32"), rng.random(16, dtype="float32")

    def train(directory, model, initial_epoch=0, epochs=3):
        keras.utils.set_random_seed(1)
        callback = RunCheckpoint(directory, every=4, keep=3)
        model.fit(x, y, batch_size=4, epochs=epochs, initial_epoch=initial_epoch, shuffle=False,
                  callbacks=[callback], verbose=0)  # fmt: skip
        return [v.numpy() for v in model.variables]

    keras.utils.set_random_seed(0)
    whole = train(tmp_path / "whole", _model())  # 12 steps, dropout on
    keras.utils.set_random_seed(0)
    train(tmp_path / "cut", _model(), epochs=2)  # stopped after step 8
    newest = tmp_path / "cut" / "ckpt-00000008.npz"
    newest.write_bytes(newest.read_bytes()[:-100])  # cut short, as by a full disk
    keras.utils.set_random_seed(0)
    resumed = _model()
    with pytest.warns(UserWarning, match=r"ckpt-00000008.npz \(BadZipFile.*from ckpt-00000004"):
        assert restore_latest(resumed, tmp_path / "cut") == 4
    for a, b in zip(train(tmp_path / "cut", resumed, initial_epoch=1), whole, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
    (tmp_path / "only_bad").mkdir()
    (tmp_path / "only_bad" / "ckpt-00000004.npz").write_bytes(b"PK\x03\x04 nothing more")
    with pytest.raises(UserInputError, match="Every checkpoint .* is damaged"):
        restore_latest(_model(), tmp_path / "only_bad")


@pytest.mark.slow
def test_sigkilled_run_resumes_to_the_same_weights(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt")
    # Uninterrupted: 45 steps, epochs of 15, checkpoints every 10 steps, dropout on.
    run_keras_attn(pretrain_args(corpus, tmp_path / "whole"))
    # Killed (SIGKILL) once step 20's checkpoint exists: mid-epoch 2, then the same command again.
    args = pretrain_args(corpus, tmp_path / "killed")
    process = keras_attn_command(args)
    target = tmp_path / "killed" / "checkpoints" / "ckpt-00000020.npz"
    deadline = time.time() + 240
    while not target.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (tmp_path / "killed" / "model.keras").exists()
    output = run_keras_attn(args)
    assert "resumed at step" in output
    for a, b in zip(
        final_weights(tmp_path / "whole"), final_weights(tmp_path / "killed"), strict=True
    ):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


def test_a_failed_model_save_leaves_the_old_file_and_no_partial_one(tmp_path, monkeypatch):
    from keras_attn.training.checkpoints import save_trained_model

    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    target = tmp_path / "model.keras"
    save_trained_model(model, target)
    before = target.read_bytes()

    def broken_save(path, *args, **kwargs):
        open(path, "wb").write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(model, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_trained_model(model, target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.keras"]
