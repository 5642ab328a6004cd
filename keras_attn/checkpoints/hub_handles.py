"""Models by the names users type: `hf://ORG/NAME[@REVISION]` (a Hugging Face repo, a
`transformers` folder or a keras-hub preset) and `hf://ORG/NAME[@REVISION]/FILE.gguf` (one
GGUF file of a repo), fetched through `huggingface_hub` into its own cache (shared with
`transformers` and keras-hub); `kaggle://OWNER/MODEL/FRAMEWORK/VARIATION[/VERSION]`
(keras-hub's presets on Kaggle) through `kagglehub` and its cache. From the Hugging Face
hub, safely:

- only the files a model needs are fetched (configuration, tokenizer files, safetensors,
  keras-hub's `.h5` weights, or the one GGUF file); a repo whose weights are only pickled
  (`pytorch_model.bin`, ...) is refused by name, never unpickled;
- every fetched file is checked against the hub's checksum (an LFS file's sha256, a git
  blob id otherwise); a file that does not match is removed from the cache and named;
- `HF_HUB_OFFLINE=1` reads the cache, and names the handle when it is not there;
- the commit a revision resolved to is returned, for a run to record.

Sizes inside the files are the loaders' to check (`keras_attn.checkpoints.sizes`), as for
a local folder.
"""

import dataclasses
import fnmatch
import hashlib
import os
import pathlib
import re

from keras_attn.checkpoints.checkpoint_errors import CheckpointError

HF = "hf://"
KAGGLE = "kaggle://"
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?"
_HF_HANDLE = re.compile(
    rf"^hf://(?P<repo>{_PART}/{_PART})(?:@(?P<revision>[A-Za-z0-9][A-Za-z0-9._-]{{0,254}}))?"
    r"(?:/(?P<file>[A-Za-z0-9._/-]+\.gguf))?$"
)
_KAGGLE_HANDLE = re.compile(
    rf"^kaggle://(?P<repo>{_PART}/{_PART}/{_PART}/{_PART})(?:/(?P<revision>[1-9][0-9]{{0,8}}))?$"
)
# What a model folder needs, by the hub's file names: configuration, tokenizer, weights
# (safetensors, one file or shards and their index), and a keras-hub preset's files.
FOLDER_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "*.model",  # SentencePiece: spm.model, tokenizer.model, sentencepiece.bpe.model
    "model.safetensors",
    "model-*-of-*.safetensors",
    "model.safetensors.index.json",
    "metadata.json",  # keras-hub: metadata, weights, task, preprocessor, assets
    "model.weights.h5",
    "task.json",
    "task.weights.h5",
    "preprocessor.json",
    "assets/*",
)
WEIGHTS = ("model.safetensors", "model-*-of-*.safetensors", "model.weights.h5")
# Weights that loading would unpickle (code that runs): never fetched, never read.
PICKLED = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle")
# Configuration and tokenizer files larger than this are refused before they are fetched.
MAX_TEXT_FILE_BYTES = 256 * 2**20


@dataclasses.dataclass(frozen=True)
class Handle:
    """A parsed handle: its text, repo (`ORG/NAME`; Kaggle's `OWNER/MODEL/FRAMEWORK/
    VARIATION`), revision (`None`: the default branch, or Kaggle's latest version), GGUF
    file (`None`: the repo as a model folder) and hub (`"hf"`, `"kaggle"`)."""

    text: str
    repo: str
    revision: str | None = None
    file: str | None = None
    hub: str = "hf"


@dataclasses.dataclass(frozen=True)
class Resolved:
    """Where a handle's files are on this machine, and the commit they came from."""

    path: pathlib.Path
    handle: Handle
    commit: str | None


def is_handle(text):
    """Whether `text` names a model on a hub (`hf://...`, `kaggle://...`)."""
    return isinstance(text, str) and text.startswith((HF, KAGGLE))


def parse_handle(text):
    """The `Handle` of `text` (`hf://ORG/NAME[@REVISION][/FILE.gguf]` or
    `kaggle://OWNER/MODEL/FRAMEWORK/VARIATION[/VERSION]`).

    Raises:
        CheckpointError: a handle that is not of that form (named, with the form).
    """
    if isinstance(text, str) and text.startswith(KAGGLE):
        match = _KAGGLE_HANDLE.match(text)
        if match is None or ".." in text:
            raise CheckpointError(
                "Expected a handle kaggle://OWNER/MODEL/FRAMEWORK/VARIATION[/VERSION] (a "
                f"version a positive integer). Received: {text!r}"
            )
        return Handle(text, match["repo"], match["revision"], None, "kaggle")
    match = _HF_HANDLE.match(text) if isinstance(text, str) else None
    if match is None or ".." in text or "//" in text[len(HF) :]:
        raise CheckpointError(
            "Expected a handle hf://ORG/NAME, hf://ORG/NAME@REVISION or "
            f"hf://ORG/NAME[@REVISION]/FILE.gguf. Received: {text!r}"
        )
    return Handle(text, match["repo"], match["revision"], match["file"])


def resolve(text):
    """The local folder (or GGUF file) of the handle `text`, fetched when not cached.

    Args:
        text: `hf://ORG/NAME[@REVISION]` or `hf://ORG/NAME[@REVISION]/FILE.gguf`.

    Returns:
        A `Resolved`: the path (a folder of the repo's snapshot, or the GGUF file in
        it) and the commit.

    Raises:
        CheckpointError: naming the handle, for a repo, revision or file the hub does not
            have, a hub that fails or cannot be reached, pickled weights, a file whose
            checksum does not match, or (offline) a handle not in the cache.
    """
    handle = parse_handle(text)
    if handle.hub == "kaggle":
        return _from_kaggle(handle)
    from huggingface_hub import constants

    if constants.is_offline_mode():
        return _from_cache(handle)
    return _fetch(handle)


def _hub_call(handle, call, what="the hub"):
    """`call()`, its failures as one `CheckpointError` naming `handle`."""
    import httpx2  # huggingface_hub's HTTP client
    from huggingface_hub import errors

    try:
        return call()
    except errors.RepositoryNotFoundError:
        raise CheckpointError(f"{handle.text}: no such repository on {what}") from None
    except errors.RevisionNotFoundError:
        raise CheckpointError(
            f"{handle.text}: the repository has no revision {handle.revision or 'main'!r}"
        ) from None
    except errors.EntryNotFoundError as error:
        raise CheckpointError(f"{handle.text}: a file is missing on the hub ({error})") from None
    except errors.HfHubHTTPError as error:
        status = getattr(getattr(error, "response", None), "status_code", None)
        raise CheckpointError(
            f"{handle.text}: the hub answered {status or 'an error'}; nothing was loaded"
        ) from None
    except (OSError, ValueError, httpx2.HTTPError) as error:  # refused, cut short, resized
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        raise CheckpointError(
            f"{handle.text}: the download failed ({type(error).__name__}: {first}); the "
            "partial file is kept aside by huggingface_hub and resumed next time"
        ) from None


def _endpoint():
    return os.environ.get("HF_ENDPOINT") or None  # None: huggingface_hub's own default


def _fetch(handle):
    from huggingface_hub import HfApi, RepoFile, snapshot_download

    api = HfApi(endpoint=_endpoint())
    revision = handle.revision or "main"
    info = _hub_call(handle, lambda: api.repo_info(handle.repo, revision=revision))
    tree = _hub_call(
        handle,
        lambda: {
            entry.path: entry
            for entry in api.list_repo_tree(handle.repo, recursive=True, revision=info.sha)
            if isinstance(entry, RepoFile)
        },
    )
    wanted = _wanted(handle, tree)
    # By the revision's name, so that the cache maps it to the commit (what an offline
    # run reads); the folder is the commit's, which the listing above must be of.
    folder = _hub_call(
        handle,
        lambda: snapshot_download(
            handle.repo, revision=revision, allow_patterns=wanted, endpoint=_endpoint()
        ),
    )
    folder = pathlib.Path(folder)
    if folder.name != info.sha:
        raise CheckpointError(
            f"{handle.text}: {revision!r} moved from {info.sha} to {folder.name} during the "
            "download; ask again, or pin a commit (hf://ORG/NAME@COMMIT)"
        )
    for name in wanted:
        _verify(handle, folder / name, tree[name])
    return Resolved(folder / handle.file if handle.file else folder, handle, info.sha)


def _wanted(handle, tree):
    """The repo's files to fetch for `handle`; refuses pickled-only weights."""
    names = sorted(tree)
    if handle.file:
        if handle.file not in tree:
            ggufs = [n for n in names if n.endswith(".gguf")]
            raise CheckpointError(
                f"{handle.text}: the repository has no {handle.file}; its GGUF files: {ggufs}"
            )
        return [handle.file]
    wanted = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in FOLDER_FILES)]
    if not any(fnmatch.fnmatchcase(n, p) for n in wanted for p in WEIGHTS):
        pickled = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in PICKLED)]
        ggufs = [n for n in names if n.endswith(".gguf")]
        if pickled:
            raise CheckpointError(
                f"{handle.text} offers its weights only pickled ({', '.join(pickled[:3])}), "
                "which keras_attn never loads (unpickling runs code): ask for a revision "
                "with model.safetensors"
            )
        if ggufs:
            raise CheckpointError(
                f"{handle.text} holds GGUF files, not a model folder: name one, "
                f"{HF}{handle.repo}/{ggufs[0]} ({len(ggufs)} in all)"
            )
        raise CheckpointError(
            f"{handle.text} holds no weights keras_attn reads (model.safetensors, shards "
            f"with their index, or a keras-hub preset's model.weights.h5); it has {names[:10]}"
        )
    for name in wanted:
        entry = tree[name]
        weights = name.endswith((".safetensors", ".h5", ".model"))
        if not weights and entry.size > MAX_TEXT_FILE_BYTES:
            raise CheckpointError(
                f"{handle.text}: {name} is {entry.size} bytes; a configuration or "
                f"tokenizer file may hold at most {MAX_TEXT_FILE_BYTES}"
            )
    return wanted


def _verify(handle, path, entry):
    """Checks the fetched `path` against the hub's checksum of `entry` (once per blob:
    a mark in keras_attn's cache remembers a blob checked); a mismatch removes the file
    from the cache and is named."""
    expected = entry.lfs.sha256 if entry.lfs is not None else entry.blob_id
    blob = path.resolve()
    stat = blob.stat()
    mark = _marks() / expected
    stamp = f"{stat.st_size} {stat.st_mtime_ns} {stat.st_ino}"
    try:
        if mark.read_text() == stamp:
            return
    except OSError:
        pass
    digest = hashlib.sha256() if entry.lfs is not None else hashlib.sha1()
    if entry.lfs is None:
        digest.update(b"blob %d\0" % stat.st_size)
    with open(blob, "rb") as file:
        for chunk in iter(lambda: file.read(2**22), b""):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        for stale in (path, blob):
            stale.unlink(missing_ok=True)
        raise CheckpointError(
            f"{handle.text}: {entry.path} does not match the hub's checksum "
            f"({'sha256' if entry.lfs is not None else 'git blob id'} {expected}); "
            "it was removed from the cache"
        )
    try:
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.write_text(stamp)
    except OSError:  # a read-only cache: checked again next time
        pass


def _marks():
    from keras_attn.cache_dir import default_cache_dir

    return default_cache_dir() / "hub_checked"


def _from_cache(handle):
    """`handle` from huggingface_hub's cache only (`HF_HUB_OFFLINE=1`)."""
    from huggingface_hub import errors, snapshot_download

    patterns = [handle.file] if handle.file else list(FOLDER_FILES)
    try:
        folder = pathlib.Path(
            snapshot_download(
                handle.repo,
                revision=handle.revision or "main",
                allow_patterns=patterns,
                local_files_only=True,
            )
        )
    except (errors.LocalEntryNotFoundError, OSError, ValueError):
        folder = None
    target = folder / handle.file if folder and handle.file else folder
    if target is None or not target.exists():
        raise CheckpointError(
            f"{handle.text} is not in the cache and HF_HUB_OFFLINE=1: fetch it once online "
            "(or unset HF_HUB_OFFLINE)"
        )
    if not handle.file and not _whole(target):
        raise CheckpointError(
            f"{handle.text} is only partly in the cache (a download that failed) and "
            "HF_HUB_OFFLINE=1: fetch it again online"
        )
    commit = folder.name if re.fullmatch(r"[0-9a-f]{40}", folder.name) else None
    return Resolved(target, handle, commit)


def _whole(folder):
    """Whether a cached folder holds its weights: one file, or every shard its index
    names."""
    import json

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False
        return all((folder / str(shard)).is_file() for shard in shards)
    return any((folder / name).is_file() for name in ("model.safetensors", "model.weights.h5"))


def _from_kaggle(handle):
    """`handle` through `kagglehub` (its cache, `KAGGLEHUB_CACHE`; a version named is read
    from the cache without the network, the latest needs it); its failures as one
    `CheckpointError` naming the handle."""
    import kagglehub

    name = handle.repo + (f"/{handle.revision}" if handle.revision else "")
    try:
        folder = pathlib.Path(kagglehub.model_download(name))
    except Exception as error:  # kagglehub's own, requests', OSError: all mean "not here"
        first = (str(error).strip().splitlines() or [""])[0][:200]
        raise CheckpointError(
            f"{handle.text}: kagglehub could not fetch it ({type(error).__name__}: {first}); "
            "a version in kagglehub's cache is read offline"
        ) from error
    version = handle.revision or (folder.name if folder.name.isdigit() else None)
    return Resolved(folder, handle, version)
