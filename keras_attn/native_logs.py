"""TensorFlow's native start-up lines kept off a user's terminal.

Importing TensorFlow prints C++ log lines before its logging reads
`TF_CPP_MIN_LOG_LEVEL` (oneDNN's notice, CUDA probing: "Could not find cuda
drivers", "failed call to cuInit", CPU features), so the variable alone does not
quiet them. Unless the user set `TF_CPP_MIN_LOG_LEVEL` themselves, `import
keras_attn` arranges that TensorFlow's first import (by Keras, by our modules or by
the user) and its device probe run with the process's stderr (file descriptor 2)
pointed at a temporary file; afterwards everything written there except those
native log lines is passed on (Python warnings too), and all of it if the import
fails. The `keras-attn` command does the same (`keras-attn --verbose` shows them).
"""

import contextlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile

# absl's line prefix (severity, date, time, thread, file:line]), the two lines
# TensorFlow prints without it at start-up, and LiteRT's notice at its first call.
_NATIVE_LINE = re.compile(
    rb"^(?:[IWEF]\d{4} [\d:.]+ +\d+ [^\]\s]+:\d+\]"
    rb"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    rb"|To enable the following instructions: "
    rb"|INFO: Created TensorFlow Lite XNNPACK delegate)"
)


def without_native_lines(text):
    """`text` (bytes) less TensorFlow's native log lines."""
    return b"".join(line for line in text.splitlines(keepends=True) if not _NATIVE_LINE.match(line))


@contextlib.contextmanager
def native_stderr_held(hold=True):
    """Points file descriptor 2 at a temporary file while the block runs; then writes
    what it received to stderr, less TensorFlow's native log lines, or all of it if
    the block raised. Does nothing if `hold` is false or descriptor 2 cannot be
    duplicated (no stderr)."""
    try:
        saved = os.dup(2) if hold else None
    except OSError:
        saved = None
    if saved is None:
        yield
        return
    _flush_stderr()
    failed = False
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            _flush_stderr()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            text = held.read()
            passed_on = text if failed else without_native_lines(text)
            if passed_on:
                os.write(2, passed_on)


def _flush_stderr():
    with contextlib.suppress(AttributeError, OSError, ValueError):
        sys.stderr.flush()


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` as the other finders do, and runs its import and device
    probe with the native lines held (once; then it leaves `sys.meta_path`)."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        _remove_finder()
        spec = importlib.util.find_spec(name)  # by the finders after this one
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _HeldLoader(spec.loader)
        return spec


class _HeldLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        with native_stderr_held():
            try:
                self.loader.exec_module(module)
                # CUDA's probe speaks now, not at the first op; no runtime is made yet,
                # so memory growth and visible devices can still be set after it.
                module.config.list_physical_devices()
            finally:  # the module keeps TensorFlow's own loader
                module.__loader__ = self.loader
                if module.__spec__ is not None:
                    module.__spec__.loader = self.loader


_quieted = {"by_us": False}


def quiet_tensorflow_start():
    """What `import keras_attn` does: unless the user set `TF_CPP_MIN_LOG_LEVEL` or
    TensorFlow is imported already, TensorFlow's C++ INFO and WARNING lines are off
    (`TF_CPP_MIN_LOG_LEVEL=2`) and its native start-up lines are held back at its
    first import."""
    if "tensorflow" in sys.modules or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    _quieted["by_us"] = True
    if not any(isinstance(finder, _QuietTensorFlowImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowImport())


def quiet_command_line():
    """What a `keras-attn` command (the main job, each example script) adds, unless
    `--verbose`: if `quiet_tensorflow_start` chose the level (the user did not),
    TensorFlow's C++ ERROR lines are off too (`TF_CPP_MIN_LOG_LEVEL=3`, before TensorFlow
    starts; the processes a command starts inherit it). At run time they are notices (oneDNN's
    "supports DT_INT64 only on platforms with AVX-512") or repeat an error the command
    reports as its own `error:` line; FATAL lines still show."""
    if _quieted["by_us"] and "tensorflow" not in sys.modules:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"


def loud_tensorflow_start():
    """Undoes `quiet_tensorflow_start` before TensorFlow starts (`keras-attn
    --verbose`): every C++ log line shown, unless the user chose a level."""
    if _quieted["by_us"] and "tensorflow" not in sys.modules:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    _remove_finder()


def _remove_finder():
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _QuietTensorFlowImport)]
