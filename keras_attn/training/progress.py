"""Progress a person can trust: counted over the run's steps, plain off a terminal, and
never silent for a minute.

Keras's progress bar counts the steps of one epoch (`2/100` on a 30-step run, with that
epoch's ETA) and, sent to a file, writes a carriage-return update per step. `RunProgress`
counts the optimizer's steps against the run's `training.steps` (a resumed run starts
where its checkpoint was): on a terminal a `tqdm` bar with the rate and the time left;
elsewhere (a log file, CI) a plain line at the first step, then every `every` seconds
and at the end, and one line per epoch with its metrics (validation included). Between
steps, while a stage runs long (the first step's tracing, a validation, saving),
`heartbeat` says so at least once a minute. A job of several stages (the main job) wraps
each in `job_stage`: its header says the stage's place and the job's time so far, and
every progress and heartbeat line in it starts with the stage's place (`[2/4] step
40/200 ...`).
"""

import contextlib
import sys
import threading
import time

import keras
import numpy as np

from keras_attn.api_export import keras_attn_export

# When anything of this module last printed (time.monotonic()), for the heartbeat.
_last_line = {"at": time.monotonic()}
# The stage of a job `job_stage` is in: the prefix of every line ("" outside a job).
_job = {"prefix": ""}


def say(line, stream=None):
    """Prints `line` (flushed, after the job stage's `[i/n] ` if in one) and notes the
    time, so a heartbeat need not speak."""
    stream = stream or sys.stdout
    print(_job["prefix"] + line, file=stream, flush=True)
    _last_line["at"] = time.monotonic()


@contextlib.contextmanager
def job_stage(index, total, title, began, stream=None):
    """Stage `index` of `total` of a job that started at `began` (`time.monotonic()`):
    prints `"== index/total title (job m:ss so far) =="`, and prefixes every line of
    this module printed inside with `"[index/total] "` (a bar's description on a
    terminal)."""
    if not 1 <= index <= total:
        raise ValueError(f"Expected 1 <= index <= total. Received: index={index}, total={total}")
    stream = stream or sys.stdout
    spent = clock(time.monotonic() - began)
    gap = "\n" if index > 1 else ""
    print(f"{gap}== {index}/{total} {title} (job {spent} so far) ==", file=stream, flush=True)
    _last_line["at"] = time.monotonic()
    _job["prefix"] = f"[{index}/{total}] "
    try:
        yield
    finally:
        _job["prefix"] = ""


def clock(seconds):
    """`75.2` -> `"1:15"`, `3725` -> `"1:02:05"`."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


@contextlib.contextmanager
def heartbeat(stage, every=45.0, stream=None):
    """While the block runs, prints `"  ... <stage> (m:ss since the start)"` whenever
    nothing of this module was printed for `every` seconds. `stage`: a string, or a
    function giving the current one. It looks every 5 seconds (or `every / 4`), so a
    silence lasts up to `every` + 5: the default 45 keeps a line coming every minute
    with room for a loaded machine's scheduling (at 60 the main job's log, on a 2-core
    machine running other work, went 61.4 s without a line while the first step traced)."""
    done = threading.Event()
    began = time.monotonic()

    def beat():
        while not done.wait(min(5.0, every / 4)):
            if time.monotonic() - _last_line["at"] >= every:
                now = stage() if callable(stage) else stage
                indent = "" if _job["prefix"] else "  "  # "[3/4] ... exporting" in a job
                say(
                    f"{indent}... {now} ({clock(time.monotonic() - began)} since the start)", stream
                )

    # The silence before the block counts: a stage that began quietly (a vocabulary
    # built, a model loaded) hears from the heartbeat a minute after the last line.
    thread = threading.Thread(target=beat, name="keras_attn-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _numbers(logs):
    """`"loss 0.693, accuracy 0.512"` of a Keras logs dict (scalars only)."""
    return ", ".join(
        f"{name} {float(value):.4g}" for name, value in (logs or {}).items() if np.ndim(value) == 0
    )


@keras_attn_export("keras_attn.training.RunProgress", serializable=False)
class RunProgress(keras.callbacks.Callback):
    """Progress over the whole run: optimizer steps out of `total_steps`, with the rate
    and the time left.

    Args:
        total_steps: the run's steps in all (`training.steps`).
        bar: `True`: a `tqdm` bar (a terminal); `False`: plain lines (a file, a pipe);
            `None` (default): a bar when `stream` is a terminal.
        every: seconds between plain lines (one also at the first step and the last).
        stream: where to write (default `sys.stdout`).

    Call arguments:
        None: a Keras callback; pass it to `fit(callbacks=[...])` with `verbose=0`.

    `stage` says what the run is doing (`"training, step 30 of 200"`, `"validating
    after step 100"`), for a `heartbeat` around the whole run.

    Example:

    >>> import io, keras, numpy as np
    >>> from keras_attn.training import RunProgress
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> out = io.StringIO()
    >>> _ = model.fit(np.ones((8, 2)), np.ones(8), batch_size=2, epochs=2, verbose=0,
    ...               callbacks=[RunProgress(8, bar=False, stream=out)])
    >>> [line.split(" (")[0] for line in out.getvalue().splitlines()]
    ['step 1/8', 'epoch 1', 'step 8/8', 'epoch 2']
    >>> out.getvalue().splitlines()[1].split(": ")[0]
    'epoch 1 (step 4/8)'
    """

    def __init__(self, total_steps, bar=None, every=30.0, stream=None):
        super().__init__()
        if not isinstance(total_steps, int) or total_steps < 1:
            raise ValueError(
                f"Expected `total_steps` an int >= 1. Received: total_steps={total_steps!r}"
            )
        if not isinstance(every, (int, float)) or every <= 0:
            raise ValueError(f"Expected `every` seconds > 0. Received: every={every!r}")
        self.total_steps, self.every, self.bar = total_steps, every, bar
        self.stream = stream or sys.stdout
        self.stage = "preparing the data and the model"
        self._tqdm = None

    def _step(self):
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_train_begin(self, logs=None):
        isatty = getattr(self.stream, "isatty", lambda: False)()
        self._first = self._step()
        self._began = self._printed = time.monotonic()
        if self.bar if self.bar is not None else isatty:
            from tqdm import tqdm

            self._tqdm = tqdm(
                total=self.total_steps,
                initial=self._first,
                unit="step",
                file=self.stream,
                dynamic_ncols=True,
                smoothing=0.1,
                desc=_job["prefix"].strip() or None,
            )
        self.stage = f"training: the first step (tracing it) from step {self._first}"

    def on_train_batch_end(self, batch, logs=None):
        step = self._step()
        self.stage = f"training, step {step} of {self.total_steps}"
        if self._tqdm is not None:
            _last_line["at"] = time.monotonic()  # the bar moved: news enough
        if self._tqdm is not None:
            self._tqdm.update(step - self._tqdm.n)
            self._tqdm.set_postfix_str(_numbers(logs), refresh=False)
            return
        now = time.monotonic()
        if step == self._first + 1 or step >= self.total_steps or now - self._printed >= self.every:
            self._printed = now
            say(self._line(step, logs, now), self.stream)

    def _line(self, step, logs, now):
        done = step - self._first
        rate = done / max(now - self._began, 1e-9)
        left = (self.total_steps - step) / rate if rate > 0 else float("inf")
        percent = 100 * step / self.total_steps
        if step < self.total_steps:
            timing = f"{rate:.2f} steps/s, {clock(left)} left"
        else:
            timing = f"{clock(now - self._began)} in all"
        numbers = _numbers(logs)
        return f"step {step}/{self.total_steps} ({percent:.0f}%, {timing})" + (
            f": {numbers}" if numbers else ""
        )

    def on_test_begin(self, logs=None):
        self.stage = f"validating after step {self._step()}"

    def on_epoch_end(self, epoch, logs=None):
        line = f"epoch {epoch + 1} (step {self._step()}/{self.total_steps}): {_numbers(logs)}"
        if self._tqdm is not None:
            self._tqdm.write(_job["prefix"] + line, file=self.stream)
            _last_line["at"] = time.monotonic()
        else:
            say(line, self.stream)

    def on_train_end(self, logs=None):
        self.stage = f"after step {self._step()}: the final validation, saving"
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
