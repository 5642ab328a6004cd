"""One-file exports (ONNX, OpenVINO, LiteRT) written whole, never over another file,
with a SHA-256 checksum beside them that every loader checks.

Each writer builds its file(s) in a hidden folder beside the target and moves them
into place at the end (`claimed_file`): an interrupted or failed export leaves
nothing, and an existing export is never replaced, since its files are linked into
place (`os.link` fails where a name exists) rather than renamed over it. The checksum
file `<file>.sha256` (the `sha256sum` format) lists every file of the export (OpenVINO:
`model.xml` and `model.bin`); `verify_checksum` reads it back before a runtime loads the
export, so a bit flipped in the weights is refused, not served.
"""

import contextlib
import hashlib
import os
import pathlib
import re
import secrets
import shutil

from keras_attn.api_export import keras_attn_export

CHECKSUM_SUFFIX = ".sha256"
# A checksum file lists at most two files: it is read only up to this many bytes.
_CHECKSUM_FILE_LIMIT = 4096


class ChecksumMismatch(ValueError):
    """An export's file does not match the checksum written beside it."""


def export_files(path):
    """The files an export at `path` consists of: OpenVINO's `.xml` has its `.bin`."""
    path = pathlib.Path(path)
    return [path, path.with_suffix(".bin")] if path.suffix == ".xml" else [path]


def checksum_path(path):
    """`<path>.sha256`, the checksum file beside the export `path`."""
    path = pathlib.Path(path)
    return path.with_name(path.name + CHECKSUM_SUFFIX)


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@contextlib.contextmanager
def claimed_file(path):
    """Yields a path in a hidden staging folder beside `path` for a writer to write the
    export to (with its companion `.bin` for OpenVINO); when the block ends without an
    error, writes the checksum and moves every file into place, refusing to replace one
    that exists (`FileExistsError` naming it, nothing moved). On an error or an
    interrupt the staging folder is removed and `path` is left as it was.

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.export.one_file import claimed_file, verify_checksum
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "m.tflite"
    >>> with claimed_file(target) as partial:
    ...     _ = partial.write_bytes(b"weights")
    >>> sorted(p.name for p in target.parent.iterdir()), verify_checksum(target)
    (['m.tflite', 'm.tflite.sha256'], True)
    """
    path = pathlib.Path(path)
    targets = [*export_files(path), checksum_path(path)]
    _refuse_existing(targets)
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.parent / f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.partial"
    staged.mkdir()
    try:
        yield staged / path.name
        written = [staged / p.name for p in export_files(path)]
        missing = [p.name for p in written if not p.is_file()]
        if missing:
            raise RuntimeError(f"the export wrote no {', '.join(missing)}")
        lines = "".join(f"{_digest(p)}  {p.name}\n" for p in written)
        (staged / checksum_path(path).name).write_text(lines, encoding="ascii")
        _refuse_existing(targets)
        placed = []
        try:
            for target in [*export_files(path), checksum_path(path)]:
                _place(staged / target.name, target)
                placed.append(target)
        except BaseException:  # another writer's file, or a failure: ours come out again
            for target in placed:
                target.unlink(missing_ok=True)
            _refuse_existing(targets)
            raise
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _place(source, target):
    """Gives `source` the name `target`, never over an existing file: link(2) refuses an
    existing name; where the file system has no hard links, the name is claimed by an
    exclusive create first, then the file moved over that empty claim."""
    try:
        os.link(source, target)
    except FileExistsError:
        raise
    except OSError:  # no hard links here (EPERM, ENOTSUP, ...)
        os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        os.replace(source, target)


def _refuse_existing(targets):
    found = [str(t) for t in targets if os.path.lexists(t)]
    if found:
        raise FileExistsError(
            f"Expected a new export path: {', '.join(found)} exists (an export never "
            "replaces one; remove it or choose another path)"
        )


@keras_attn_export("keras_attn.export.verify_checksum")
def verify_checksum(path):
    """Checks the one-file export `path` (and OpenVINO's `.bin`) against the checksum
    file `<path>.sha256` written beside it at export.

    Args:
        path: the `.onnx`, `.xml` or `.tflite` file.

    Returns:
        True when checked; False when no checksum file is beside it (a file this
        package did not export: nothing to check against).

    Raises:
        ChecksumMismatch (a `ValueError`): a file differs from its checksum (changed or
            damaged after export), or the checksum file is malformed or names other
            files, with the file named.

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.export import verify_checksum
    >>> from keras_attn.export.one_file import claimed_file
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "m.onnx"
    >>> with claimed_file(target) as partial:
    ...     _ = partial.write_bytes(b"weights")
    >>> _ = target.write_bytes(b"weighta")  # one flipped bit
    >>> verify_checksum(target)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    keras_attn.export.one_file.ChecksumMismatch: ...m.onnx does not match its checksum ...
    """
    path = pathlib.Path(path)
    sums = checksum_path(path)
    if not sums.is_file():
        return False
    with open(sums, "rb") as f:
        text = f.read(_CHECKSUM_FILE_LIMIT + 1)
    names = [p.name for p in export_files(path)]
    listed = {}
    for line in text.decode("ascii", errors="replace").splitlines():
        match = re.fullmatch(r"([0-9a-f]{64}) [ *](.+)", line)
        if match is None:
            listed = None
            break
        listed[match.group(2)] = match.group(1)
    if len(text) > _CHECKSUM_FILE_LIMIT or listed is None or sorted(listed) != sorted(names):
        raise ChecksumMismatch(
            f"{sums} is not the checksum file of {path.name} (expected one line "
            f"'<sha256>  name' for each of {names}): export it again"
        )
    for name in names:
        file = path.with_name(name)
        if not file.is_file() or _digest(file) != listed[name]:
            raise ChecksumMismatch(
                f"{file} does not match its checksum in {sums.name} (changed or damaged "
                "after export): export it again"
            )
    return True
