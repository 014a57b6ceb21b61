"""A model hub on 127.0.0.1 that answers huggingface_hub's download routes (HEAD and GET of
/{repo}/resolve/{revision}/{file}, with ranges), so pulls are tested with HF_ENDPOINT pointed
here and no request leaves the machine."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROUTE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CHUNK = 64 << 10


@dataclass
class Hub:
    files: dict[tuple[str, str], bytes] = field(default_factory=dict)
    sha_override: str | None = None  # advertise this sha256 instead of the file's
    bytes_per_s: float | None = None  # throttle GETs (a pull the test can cancel midway)
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, Range)

    def __post_init__(self) -> None:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_HEAD(self) -> None:
                hub.answer(self, body=False)

            def do_GET(self) -> None:
                hub.answer(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        self.requests.append((h.command, h.path, h.headers.get("Range", "")))
        m = ROUTE.match(h.path.split("?")[0])
        repo, file = (m.group(1), m.group(3)) if m else ("", "")
        data = self.files.get((repo, file))
        if data is None:
            known = any(r == repo for r, _ in self.files)
            h.send_response(404)
            h.send_header("X-Error-Code", "EntryNotFound" if known else "RepoNotFound")
            h.send_header("X-Error-Message", "Entry not found" if known else "Repository not found")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        sha = self.sha_override or hashlib.sha256(data).hexdigest()
        start = 0
        if body and (r := re.match(r"bytes=(\d+)-$", h.headers.get("Range", ""))):
            start = int(r.group(1))
        h.send_response(206 if start else 200)
        h.send_header("X-Repo-Commit", COMMIT)
        h.send_header("X-Linked-Etag", f'"{sha}"')
        h.send_header("X-Linked-Size", str(len(data)))
        h.send_header("ETag", f'"{sha}"')
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Length", str(len(data) - start))
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.end_headers()
        if body:
            self.send_body(h, data[start:])

    def send_body(self, h: BaseHTTPRequestHandler, data: bytes) -> None:
        try:
            for i in range(0, len(data), CHUNK):
                h.wfile.write(data[i:i + CHUNK])
                if self.bytes_per_s:
                    time.sleep(CHUNK / self.bytes_per_s)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a cancelled pull)
