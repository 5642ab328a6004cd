"""Files written whole or not at all: a failed or interrupted run never truncates or
half-writes a file that was there before."""

import contextlib
import os
import pathlib
import tempfile


@contextlib.contextmanager
def replaced_on_success(path):
    """Yields a temporary path beside `path`; when the block ends without an error it
    replaces `path` (atomically, `os.replace`), otherwise it is removed and `path` is
    left as it was (an interrupt included).

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.atomic_files import replaced_on_success
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.csv"
    >>> _ = target.write_text("precious")
    >>> try:
    ...     with replaced_on_success(target) as partial:
    ...         _ = partial.write_text("half")
    ...         raise RuntimeError("interrupted")
    ... except RuntimeError:
    ...     pass
    >>> target.read_text(), sorted(p.name for p in target.parent.iterdir())
    ('precious', ['out.csv'])
    """
    path = pathlib.Path(path)
    descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(descriptor)
    partial = pathlib.Path(name)
    try:
        yield partial
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.chmod(partial, 0o666 & ~_umask())  # what a plain open() would have given
    os.replace(partial, path)


def _umask():
    """The process's umask: read from /proc where it can be (setting it to read it back
    would change it for a moment under other threads)."""
    try:
        for line in pathlib.Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask
