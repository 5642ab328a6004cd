"""TF Serving's version folders, claimed atomically.

TF Serving watches `<base>/<name>/` and loads every sub-folder whose name is an
integer as soon as it appears. An export therefore writes into a staging folder
beside the versions (`.staging-<host>-<pid>-<random>`, a name the server ignores),
checks it, and only then renames it to its version number: the rename is atomic, so
the server sees a whole version or none. Two exports that race for the next number
cannot both get it: a rename onto an existing version fails, and the loser takes the
next free number.
"""

import contextlib
import errno
import os
import pathlib
import re
import secrets
import shutil
import socket

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import UserInputError
from keras_attn.export_formats import file_formats, format_of_file

STAGING_PREFIX = ".staging-"


def _check_name(name):
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(name)) or str(name) in (".", ".."):
        raise ValueError(
            f"Expected a model name of letters, digits, '_', '.', '-'. Received: name={name!r}"
        )


def _versions(model_dir):
    model_dir = pathlib.Path(model_dir)
    return (
        [int(p.name) for p in model_dir.iterdir() if p.name.isdigit()] if model_dir.is_dir() else []
    )


@keras_attn_export("keras_attn.export.next_version_dir")
def next_version_dir(base, name):
    """`base/name/N`, N one more than the highest integer version there (1 if none).

    Only a guess when other exports may run at the same time: `export_saved_model`
    given the model folder `base/name` claims the number when it publishes.

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.export import next_version_dir
    >>> base = pathlib.Path(tempfile.mkdtemp())
    >>> (base / "sentiment" / "3").mkdir(parents=True)
    >>> next_version_dir(base, "sentiment").name
    '4'
    """
    _check_name(name)
    folder = pathlib.Path(base) / name
    return folder / str(max(_versions(folder), default=0) + 1)


def split_target(path):
    """`(model folder, version or None)` of an export target: a version folder
    `<base>/<name>/<N>` or a model folder `<base>/<name>` (next free version)."""
    path = pathlib.Path(path)
    if path.name.isdigit():
        if int(path.name) < 1:
            raise ValueError(
                f"Expected a version number of 1 or more. Received: path={str(path)!r}"
            )
        if path.exists():
            raise UserInputError(
                f"Expected a new version folder. Received: path={str(path)!r} (exists)"
            )
        _check_name(path.parent.name)
        return path.parent, int(path.name)
    _check_name(path.name)
    return path, None


@contextlib.contextmanager
def staging_folder(model_dir):
    """A new empty folder inside `model_dir` that TF Serving ignores; removed on exit
    unless it was published (renamed) meanwhile."""
    model_dir = pathlib.Path(model_dir)
    try:
        model_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file in the way, a name too long, no permission
        raise UserInputError(
            f"cannot make the model folder {model_dir}: {error.strerror or error}"
        ) from None
    _remove_abandoned(model_dir)
    staged = (
        model_dir / f"{STAGING_PREFIX}{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
    )
    staged.mkdir()
    try:
        yield staged
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def publish(staged, model_dir, version=None):
    """Renames the folder `staged` to `model_dir/<version>` atomically; returns it.

    `version=None`: the next free number, the one after it if another export takes
    it first. A given `version` that exists is refused with `UserInputError`."""
    model_dir = pathlib.Path(model_dir)
    number = version or max(_versions(model_dir), default=0) + 1
    while True:
        target = model_dir / str(number)
        if not target.exists():  # rename(2) would replace an *empty* folder of that name
            try:
                os.rename(staged, target)
                return target
            except OSError as error:
                if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
        if version is not None:
            raise UserInputError(
                f"Expected a new version folder. Received: path={str(target)!r} (exists)"
            )
        number = max([number, *_versions(model_dir)]) + 1


def _remove_abandoned(model_dir):
    """Staging folders of this host's exports that were killed (their process is gone)."""
    host = socket.gethostname()
    for folder in model_dir.glob(f"{STAGING_PREFIX}{host}-*"):
        pid = folder.name[len(f"{STAGING_PREFIX}{host}-") :].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _one_file(folder):
    """The one-file export in a version folder (`keras-attn export --format F` writes
    `<base>/<name>/<F>/<version>/model.<suffix>`), or None."""
    names = (record.file_name for record in file_formats())
    return next((folder / name for name in names if (folder / name).is_file()), None)


def resolve_export(path):
    """The export that `path` names: a one-file export's file (`.onnx`, `.xml`,
    `.tflite`) or a SavedModel's version folder. A path may name the file, its version
    folder, its format folder (`<base>/<name>/onnx`: the highest version), a SavedModel's
    version folder, or a model folder (`<base>/<name>`: its highest version, as TF
    Serving loads it).

    A model folder whose highest version is a one-file export (written so by an
    earlier `keras-attn export`) is refused with `UserInputError`: TF Serving would
    fail on that version, and the error says how to move it out."""
    path = pathlib.Path(path)
    if format_of_file(path) is not None or (path / "saved_model.pb").is_file():
        return path
    found = _one_file(path)  # a version folder of a one-file export
    if found is not None:
        return found
    versions = sorted(_versions(path), reverse=True)
    if versions:
        newest = path / str(versions[0])
        found = None if (newest / "saved_model.pb").is_file() else _one_file(newest)
        if found is None:
            return newest  # a SavedModel (or a damaged one, which its loader names)
        record = format_of_file(found)
        if path.name == record.name:
            return found
        kind = record.runtime
        raise UserInputError(
            f"{newest} holds {_article(kind)} {kind} export ({found.name}), not a "
            f"SavedModel: TF Serving loads the highest version of {path} and would fail "
            f"on it. Move it out (keras-attn export writes {kind} files to {path}/"
            f"{record.name}/), or name the file: {found}"
        )
    formats = [path / r.name for r in file_formats() if _versions(path / r.name)]
    if formats:
        raise UserInputError(
            f"{path} holds no SavedModel version, only one-file exports: name one of "
            + ", ".join(str(f) for f in formats)
        )
    raise UserInputError(f"{path} is neither a SavedModel nor a folder of numbered versions")


def _article(word):
    return "an" if word[0] in "AEIOU" else "a"


def export_kind(path):
    """`"SavedModel"`, or the runtime of a one-file export (`"ONNX"`, ...)."""
    record = format_of_file(path)
    return "SavedModel" if record is None else record.runtime


def latest_version(path):
    """A SavedModel's version folder as is; a model folder -> its highest integer
    version. A one-file export is refused with `UserInputError` naming it."""
    found = resolve_export(path)
    kind = export_kind(found)
    if kind != "SavedModel":
        raise UserInputError(
            f"{found} is {_article(kind)} {kind} export, not a SavedModel (this command "
            "reads SavedModels)"
        )
    return found


@keras_attn_export("keras_attn.export.load_saved_model")
def load_saved_model(path):
    """Loads an export with TensorFlow alone, as TF Serving would.

    The graphs tokenize with tensorflow-text ops, which TensorFlow knows only once
    `tensorflow_text` is imported; this imports it first (a bare
    `tf.saved_model.load` fails with "Op type not registered 'FastBertNormalize'").

    Args:
        path: a version folder, or a model folder (its highest version is loaded).

    Returns:
        The `tf.saved_model.load` object; call `.signatures["serving_default"]`.

    Raises:
        UserInputError: naming the version folder of a damaged export (a missing
            `saved_model.pb` or weights, a file cut short or altered).

    Example:

    >>> import tempfile, pathlib, tensorflow as tf
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import export_saved_model, load_saved_model
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "."]
    >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=8), num_classes=2)
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "sentiment"
    >>> _ = export_saved_model(model, WordPieceTokenizer(vocab, sequence_length=8), folder)
    >>> serve = load_saved_model(folder).signatures["serving_default"]  # version 1, the latest
    >>> serve(text=tf.constant(["good ."]))["probabilities"].shape
    TensorShape([1, 2])
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    version = latest_version(path)
    needed = ("saved_model.pb", "variables/variables.index")
    missing = [name for name in needed if not (version / name).is_file()]
    if missing:
        raise UserInputError(f"{version} is a damaged export: no {', '.join(missing)}")
    try:
        return tf.saved_model.load(str(version))
    except Exception as error:  # what TensorFlow raises for a file cut short or altered
        lines = str(error).strip().splitlines() or [""]
        raise UserInputError(
            f"{version} is a damaged export ({type(error).__name__}: {lines[0][:200]})"
        ) from None
