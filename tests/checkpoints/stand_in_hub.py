"""A stand-in for the Hugging Face Hub's HTTP API, for tests: the calls `huggingface_hub`
makes to find and download a model repo's files, answered from repos a test writes.

- `GET /api/models/ORG/NAME[/revision/REV]`: the repo's commit (`sha`) and files;
- `GET /api/models/ORG/NAME/tree/REV?recursive=true`: each file's size, git blob id and,
  for large and binary files (Git LFS on the real hub), its sha256;
- `HEAD|GET /ORG/NAME/resolve/REV/PATH`: the file (`Range` honoured), with the commit in
  `X-Repo-Commit` and the file's ETag: its sha256 for an LFS file (`X-Linked-Etag`), else
  its git blob id, as the hub gives them.

Errors carry the hub's `X-Error-Code` (`RepoNotFound`, `RevisionNotFound`,
`EntryNotFound`). A test can make a path answer a status (`fail`), send fewer bytes
than it declares (`truncate`) or other bytes of the same size (`alter`), and reads the
requests made (`requests`). It is not a server for real use.
"""

import hashlib
import http.server
import json
import pathlib
import re
import threading

# Files the real hub keeps in Git LFS (by suffix): their ETag is the content's sha256.
LFS_SUFFIXES = (".safetensors", ".gguf", ".h5", ".bin", ".pt", ".pth", ".ckpt", ".model")
API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<revision>[^/]+))?$")
TREE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<revision>[^/]+)$")
RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<path>.+)$")


def git_blob_id(data):
    """The git object id of `data` as a blob (what the hub's tree calls `oid`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class StandInHub:
    """`with StandInHub() as hub:` serves on a free port of 127.0.0.1 (`hub.endpoint`,
    for `HF_ENDPOINT`); `hub.add(repo, folder)` publishes a folder's files as a commit."""

    def __init__(self):
        self.repos = {}  # repo -> {"refs": {name: commit}, "commits": {commit: {path: bytes}}}
        self.failures, self.truncated, self.altered = {}, set(), set()
        self.cut_once = None
        self.requests = []
        self.resumed = []  # (file, first byte) of each download asked from past its start
        self._server = None

    def add(self, repo, folder, branch="main", tag=None):
        """Publishes the files under `folder` (a path, or a dict path -> bytes) as a new
        commit of `repo` on `branch` (and `tag`); returns the commit's id."""
        if isinstance(folder, dict):
            files = {str(k): bytes(v) for k, v in folder.items()}
        else:
            root = pathlib.Path(folder)
            files = {
                p.relative_to(root).as_posix(): p.read_bytes()
                for p in sorted(root.rglob("*"))
                if p.is_file()
            }
        entry = self.repos.setdefault(repo, {"refs": {}, "commits": {}})
        digest = hashlib.sha1(repo.encode())
        for path in sorted(files):
            digest.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
        digest.update(str(len(entry["commits"])).encode())
        commit = digest.hexdigest()
        entry["commits"][commit] = files
        entry["refs"][branch] = commit
        if tag:
            entry["refs"][tag] = commit
        return commit

    def fail(self, repo, path, status):
        """`repo`'s `path` (a file, or "" for the repo's API calls) answers `status`."""
        self.failures[(repo, path)] = status

    def truncate(self, repo, path, once=False):
        """`path` declares its full size but sends half of it and closes (`once`: only the
        next time it is asked for)."""
        self.truncated.add((repo, path))
        self.cut_once = (repo, path) if once else None

    def alter(self, repo, path):
        """`path` sends other bytes of the same size (its ETag still the original's)."""
        self.altered.add((repo, path))

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._answer(self, head=True)

            def do_GET(self):
                hub._answer(self, head=False)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    def _commit(self, repo, revision):
        entry = self.repos.get(repo)
        if entry is None:
            return None, "RepoNotFound"
        commit = entry["refs"].get(revision, revision)
        if commit not in entry["commits"]:
            return None, "RevisionNotFound"
        return commit, None

    def _answer(self, handler, head):
        path = handler.path.split("?", 1)[0]
        self.requests.append((handler.command, path))
        for pattern in (API, TREE, RESOLVE):
            match = pattern.match(path)
            if match:
                break
        else:
            return _send(handler, 404, b"", head, {"X-Error-Code": "RepoNotFound"})
        repo = match["repo"]
        file = match["path"] if pattern is RESOLVE else ""
        status = self.failures.get((repo, file))
        if status:
            return _send(handler, status, b'{"error": "failure"}', head)
        commit, error = self._commit(repo, match["revision"] or "main")
        if error:
            return _send(handler, 404, b"", head, {"X-Error-Code": error})
        files = self.repos[repo]["commits"][commit]
        if pattern is API:
            body = {"id": repo, "modelId": repo, "sha": commit, "private": False}
            body["siblings"] = [{"rfilename": name} for name in sorted(files)]
            return _send(handler, 200, json.dumps(body).encode(), head, _json())
        if pattern is TREE:
            body = [_tree_entry(name, data) for name, data in sorted(files.items())]
            return _send(handler, 200, json.dumps(body).encode(), head, _json())
        if file not in files:
            return _send(handler, 404, b"", head, {"X-Error-Code": "EntryNotFound"})
        return self._file(handler, repo, file, files[file], commit, head)

    def _file(self, handler, repo, file, data, commit, head):
        headers = {"X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
        if file.endswith(LFS_SUFFIXES):
            etag = hashlib.sha256(data).hexdigest()
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))})
        else:
            etag = git_blob_id(data)
        headers["ETag"] = f'"{etag}"'
        if (repo, file) in self.altered:
            data = bytes(b ^ 0xFF for b in data[:64]) + data[64:]
        start = 0
        requested = handler.headers.get("Range", "")
        if requested.startswith("bytes=") and not head:
            start = int(requested[len("bytes=") :].split("-")[0] or 0)
            if start:
                self.resumed.append((file, start))
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        if (repo, file) in self.truncated and not head:
            if self.cut_once == (repo, file):
                self.truncated.discard(self.cut_once)
            headers["Content-Length"] = str(len(body))
            handler.send_response(206 if start else 200)
            for key, value in headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(body[: len(body) // 2])
            handler.close_connection = True
            return None
        return _send(handler, 206 if start else 200, body, head, headers)


def _json():
    return {"Content-Type": "application/json"}


def _tree_entry(name, data):
    entry = {"type": "file", "path": name, "size": len(data), "oid": git_blob_id(data)}
    if name.endswith(LFS_SUFFIXES):
        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}
        entry["lfs"]["pointerSize"] = 134
    return entry


def _send(handler, status, body, head, headers=None):
    handler.send_response(status)
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    if "Content-Length" not in (headers or {}):
        handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if not head:
        handler.wfile.write(body)
