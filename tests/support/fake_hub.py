"""A local stand-in for the Hugging Face Hub, answering the requests the real huggingface_hub client makes when
HF_ENDPOINT points at it:

    GET  /api/models/{repo}/revision/{rev}      the repository's file list (`siblings[].rfilename`), with `sha`
    HEAD /{repo}/resolve/{rev}/{path}           metadata: X-Repo-Commit, ETag; for large (LFS) files a 302 to the
                                                CDN with X-Linked-Etag (the sha256) and X-Linked-Size
    GET  /{repo}/resolve/{rev}/{path}           the same, then the bytes (small files) or the redirect (LFS)
    GET  /cdn/{sha256}  (second server)         the bytes, with Range, from another origin like the real CDN

Errors carry the hub's X-Error-Code header (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo) that the
client turns into its exception classes: a gated repository answers 401 without a token and 403 with a token
that has not been granted access. Every request is logged, and a download can be cut mid-body once
(`cut_at`: the first GET whose body spans that byte offset stops there), as a dropped connection would.

On the browser's side the hub allows any origin (CORS), exposing the headers a Range reader needs.
"""
from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Repo:
    files: dict[str, bytes]
    gated: bool = False
    revisions: dict[str, str] = field(default_factory=dict)  # branch -> commit


@dataclass(frozen=True)
class Request:
    server: str  # "hub" or "cdn"
    method: str
    path: str
    range: str | None
    authorization: str | None


def git_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(path: str) -> bool:
    return path.endswith(".gguf")


class FakeHub:
    def __init__(self, granted_tokens: tuple[str, ...] = ("hf_granted",)) -> None:
        self.repos: dict[str, Repo] = {}
        self.granted = set(granted_tokens)
        self.requests: list[Request] = []
        self.cut_at: dict[str, int] = {}  # sha256 -> file offset where the next GET spanning it is cut
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self.hub = ThreadingHTTPServer(("127.0.0.1", 0), self._handler("hub"))
        self.cdn = ThreadingHTTPServer(("127.0.0.1", 0), self._handler("cdn"))
        for server in (self.hub, self.cdn):
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.hub.server_address[1]}"

    @property
    def cdn_url(self) -> str:
        return f"http://127.0.0.1:{self.cdn.server_address[1]}"

    def add_repo(self, name: str, files: dict[str, bytes], *, gated: bool = False,
                 revisions: tuple[str, ...] = ("main",)) -> str:
        """Publish a repository; returns the commit its branches point at."""
        commit = hashlib.sha1(json.dumps(sorted((p, git_sha(d)) for p, d in files.items())).encode()
                              + name.encode()).hexdigest()
        self.repos[name] = Repo(dict(files), gated, {r: commit for r in revisions})
        for data in files.values():
            self._blobs[hashlib.sha256(data).hexdigest()] = data
        return commit

    def close(self) -> None:
        for server in (self.hub, self.cdn):
            server.shutdown()
            server.server_close()

    def log(self, server: str | None = None, method: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if (server is None or r.server == server)
                    and (method is None or r.method == method)]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def _handler(self, role: str):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_OPTIONS(self) -> None:  # a browser's CORS preflight
                self.send_response(204)
                self._cors()
                self.send_header("Access-Control-Allow-Headers", "Range, Authorization")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_GET(self) -> None:
                self._serve(body=True)

            def _serve(self, body: bool) -> None:
                with hub._lock:
                    hub.requests.append(Request(role, self.command, self.path, self.headers.get("Range"),
                                                self.headers.get("Authorization")))
                path = urllib.parse.urlsplit(self.path).path
                if role == "cdn":
                    return self._cdn(path, body)
                parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
                if parts[:2] == ["api", "models"] and len(parts) == 6 and parts[4] == "revision":
                    return self._listing("/".join(parts[2:4]), parts[5])
                if len(parts) >= 5 and parts[2] == "resolve":
                    return self._resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]), body)
                self._error(404, None, "no such route")

            def _cors(self) -> None:
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Access-Control-Expose-Headers",
                                 "Content-Range, Content-Length, Accept-Ranges, ETag, X-Repo-Commit")

            def _error(self, status: int, code: str | None, message: str, commit: str | None = None) -> None:
                data = json.dumps({"error": message}).encode()
                self.send_response(status)
                self._cors()
                if code:
                    self.send_header("X-Error-Code", code)
                    self.send_header("X-Error-Message", message)
                if commit:
                    self.send_header("X-Repo-Commit", commit)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _repo(self, name: str, revision: str) -> tuple[Repo, str] | None:
                repo = hub.repos.get(name)
                if repo is None:  # the hub answers 401 to an anonymous request for a repository it will not show
                    self._error(401, "RepoNotFound", "Repository not found")
                    return None
                commit = revision if revision in repo.revisions.values() else repo.revisions.get(revision)
                if commit is None:
                    self._error(404, "RevisionNotFound", "Invalid rev id: " + revision)
                    return None
                return repo, commit

            def _listing(self, name: str, revision: str) -> None:
                found = self._repo(name, revision)
                if found is None:
                    return
                repo, commit = found
                data = json.dumps({
                    "_id": commit[:24], "id": name, "modelId": name, "author": name.split("/")[0], "sha": commit,
                    "private": False, "gated": "manual" if repo.gated else False, "disabled": False,
                    "tags": ["gguf"], "siblings": [{"rfilename": p} for p in sorted(repo.files)],
                }).encode()
                self.send_response(200)
                self._cors()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _resolve(self, name: str, revision: str, path: str, body: bool) -> None:
                found = self._repo(name, revision)
                if found is None:
                    return
                repo, commit = found
                if repo.gated:
                    token = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
                    if not token:
                        return self._error(401, "GatedRepo", f"Access to model {name} is restricted. You must "
                                           "have access to it and be authenticated to access it. Please log in.")
                    if token not in hub.granted:
                        return self._error(403, "GatedRepo", f"Access to model {name} is restricted and you are "
                                           "not in the authorized list.")
                data = repo.files.get(path)
                if data is None:
                    return self._error(404, "EntryNotFound", f"{path} does not exist on {revision}", commit)
                self.send_response(302 if is_lfs(path) else 200)
                self._cors()
                self.send_header("X-Repo-Commit", commit)
                self.send_header("ETag", f'"{git_sha(data)}"')
                if is_lfs(path):
                    sha = hashlib.sha256(data).hexdigest()
                    self.send_header("X-Linked-Etag", f'"{sha}"')
                    self.send_header("X-Linked-Size", str(len(data)))
                    self.send_header("Location", f"{hub.cdn_url}/cdn/{sha}?signature=test")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def _cdn(self, path: str, body: bool) -> None:
                sha = path.rsplit("/", 1)[-1]
                data = hub._blobs.get(sha)
                if data is None:
                    return self._error(404, None, "no such blob")
                start, end = 0, len(data) - 1
                header = self.headers.get("Range")
                if header:
                    first, _, last = header.removeprefix("bytes=").partition("-")
                    start = int(first)
                    end = min(int(last), end) if last else end
                    if start > end:
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                self.send_response(206 if header else 200)
                self._cors()
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("ETag", f'"{sha}"')
                self.send_header("Content-Length", str(end - start + 1))
                if header:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                self.end_headers()
                if not body:
                    return
                with hub._lock:
                    cut = hub.cut_at.get(sha)
                    if cut is not None and start < cut <= end:
                        del hub.cut_at[sha]
                    else:
                        cut = None
                if cut is not None:  # the connection drops partway through the body
                    self.wfile.write(data[start:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(data[start:end + 1])

        return Handler
