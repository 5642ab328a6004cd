"""A folder's tokenizer checked against the model it sits beside, by every reader of a
folder (`finetune --backbone`, `evaluate`, `export`, `convert`): the same check
everywhere.

A tokenizer that gives ids past the model's embedding is a silently wrong model under
XLA (an out-of-range gather is clamped to the last row) and a traceback without it; a
vocabulary cut short or replaced keeps loading and tokenizes differently. So: the files
are parsed whole (a damaged one named, with the parser's reason, as a `ValueError`),
the byte-level BPE's `merges.txt` is checked against its `vocab.json` (every merge's
parts and result are pieces; every id an integer, none twice), the tokenizer's
vocabulary must fit the embedding's rows, and a vocabulary smaller than the embedding
(a file cut at a line's end parses) is warned of.
"""

import json
import pathlib
import warnings

# A byte-level BPE vocabulary holds its 256 bytes, one piece per merge and a few special
# tokens: more pieces than this beyond those is a `merges.txt` cut short.
_SPARE_PIECES = 1000


def embedding_rows(model):
    """The rows of the token embedding of `model` (a backbone, or a task model's)."""
    return getattr(getattr(model, "backbone", model), "vocabulary_size", None)


def vocabulary_size(tokenizer):
    """Ours is a property, keras-hub's a method."""
    size = tokenizer.vocabulary_size
    return int(size() if callable(size) else size)


def _check_largest_id(largest_id, model, source):
    """A `ValueError` if a file's `largest_id` is past `model`'s embedding's last row."""
    rows = embedding_rows(model)
    if None not in (largest_id, rows) and largest_id >= rows:
        raise ValueError(
            f"{source}: ids up to {largest_id}, but the model's embedding has {rows} rows: "
            "those past it would read outside it"
        )


def check_against_embedding(tokenizer, model, source):
    """A `ValueError` if `tokenizer` (read from `source`, for the message) gives ids
    past `model`'s embedding (more pieces than rows); a warning if its vocabulary fills
    fewer rows than the embedding has (a vocabulary cut short, or another
    checkpoint's)."""
    rows, size = embedding_rows(model), vocabulary_size(tokenizer)
    if rows is None:
        return
    if size > rows:
        raise ValueError(
            f"{source}: {size} pieces, but the model's embedding has {rows} rows: ids "
            f"{rows} to {size - 1} would read past it (another checkpoint's vocabulary?)"
        )
    if size < rows - _SPARE_PIECES // 10 and size < 0.9 * rows:
        warnings.warn(
            f"{source}: {size} pieces for an embedding of {rows} rows: a vocabulary cut "
            "short, or another checkpoint's? (the rows past it are never used)",
            stacklevel=2,
        )


def check_byte_pair_files(folder):
    """A `ValueError` naming the file and line unless `vocab.json` is an object of
    distinct integer ids and every `merges.txt` line merges two pieces of it into a
    third; a warning when the vocabulary holds far more pieces than its merges make.
    Returns the largest id."""
    folder = pathlib.Path(folder)
    vocab_file, merges_file = folder / "vocab.json", folder / "merges.txt"
    try:
        vocabulary = json.loads(vocab_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{vocab_file}: not a JSON vocabulary ({error})") from None
    ids = list(vocabulary.values()) if isinstance(vocabulary, dict) else None
    if ids is None or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ValueError(f"{vocab_file}: expected a JSON object of piece -> integer id")
    if len(set(ids)) != len(ids) or (ids and min(ids) < 0):
        raise ValueError(f"{vocab_file}: ids repeated or negative")
    try:
        lines = merges_file.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise ValueError(f"{merges_file}: not UTF-8 text ({error})") from None
    merges = 0
    for number, line in enumerate(lines, start=1):
        if (number == 1 and line.startswith("#version")) or not line.strip():
            continue
        parts = line.split(" ")
        pieces = [*parts, "".join(parts)]
        if len(parts) != 2 or not all(parts) or any(p not in vocabulary for p in pieces):
            raise ValueError(
                f"{merges_file}, line {number}: expected two pieces of vocab.json whose "
                f"merge is one too. Received: {line[:80]!r}"
            )
        merges += 1
    if len(vocabulary) > 256 + merges + _SPARE_PIECES:
        warnings.warn(
            f"{merges_file}: {merges} merges for a vocabulary of {len(vocabulary)} pieces: "
            "merges.txt cut short? (those pieces can never be made)",
            stacklevel=2,
        )
    return max(ids, default=0)


def read_checked(twin, folder, model):
    """`twin.read_tokenizer(folder)` (a `registry.HuggingFaceTwin`: the tokenizer a
    Hugging Face folder keeps), parsed and checked as `load_checked` does; `None` when
    its files are not all there."""
    folder = pathlib.Path(folder)
    if not twin.tokenizer_files or any(not (folder / n).is_file() for n in twin.tokenizer_files):
        return None
    return _checked(twin.tokenizer_files, folder, model, lambda: twin.read_tokenizer(folder))


def load_checked(files, folder, model, sequence_length=128, lowercase=True):
    """`files.load(folder, ...)` (a `registry.TokenizerFiles`), every parser's error a
    `ValueError` naming the folder's files, then `check_against_embedding`."""
    folder = pathlib.Path(folder)
    return _checked(
        files.files, folder, model, lambda: files.load(folder, sequence_length, lowercase)
    )


def _checked(names, folder, model, read):
    """`read()`, the tokenizer kept in the files `names` of `folder`: a byte-level BPE's
    files checked first, any reader's error a `ValueError` naming the files, then the
    tokenizer (if any) checked against `model`'s embedding."""
    if set(names) == {"vocab.json", "merges.txt"}:
        _check_largest_id(check_byte_pair_files(folder), model, folder / "vocab.json")
    try:
        tokenizer = read()
    except Exception as error:  # each library's reader raises its own types
        lines = str(error).strip().splitlines() or [type(error).__name__]
        raise ValueError(
            f"{folder}: cannot read its tokenizer ({', '.join(names)}): "
            f"{type(error).__name__}: {lines[0][:200]}"
        ) from None
    if tokenizer is not None:
        check_against_embedding(tokenizer, model, folder / names[0])
    return tokenizer
