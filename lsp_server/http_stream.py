"""A small HTTP/1.1 client for streamed completions: cancel closes the stream.

Written on sockets and select rather than http.client because a request must stop within
a few milliseconds of its cancel flag, also while the server is silent (a long prefill):
http.client blocks in a buffered read that nothing but a timeout can interrupt. Connect
errors are retried with backoff; nothing is retried once the request has been sent.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

POLL_S = 0.02  # how often a silent stream checks its cancel flag and deadlines
MAX_ERROR_BODY = 64 * 1024


class HttpError(Exception):
    """A request that failed, said for the editor: where, what, and after how long."""


class Cancelled(Exception):
    """The request's cancel flag was set: the stream was closed."""


class DeadlineReached(Exception):
    """The caller's time budget ran out: the stream was closed."""


@dataclass(frozen=True)
class Limits:
    connect_s: float = 1.0  # per connect attempt
    read_s: float = 5.0  # longest silence from the server
    retries: int = 2  # further connect attempts after a refused or timed-out one
    backoff_s: float = 0.1  # before the first retry; doubles after each


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    base: str  # path prefix, without a trailing slash

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HttpError(f"remote url {url!r}: expected http://host:port or https://host:port")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise HttpError(f"remote url {url!r}: {exc}") from None
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.base}"


def _connect(ep: Endpoint, limits: Limits, cancel: threading.Event) -> socket.socket:
    delay = limits.backoff_s
    for attempt in range(limits.retries + 1):
        try:
            sock = socket.create_connection((ep.host, ep.port), timeout=limits.connect_s)
            break
        except socket.gaierror as exc:  # a wrong host name does not get better with retries
            raise HttpError(f"cannot resolve {ep.host}: {exc.strerror}") from None
        except OSError as exc:
            if attempt == limits.retries:
                why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
                raise HttpError(f"cannot connect to {ep}: {why} ({attempt + 1} attempts)") from None
            if cancel.wait(delay):
                raise Cancelled from None
            delay *= 2
    if ep.scheme == "https":
        try:
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=ep.host)
        except OSError as exc:  # ssl.SSLError is one: a bad certificate, or not TLS at all
            sock.close()
            raise HttpError(f"TLS with {ep} failed: {exc}") from None
    sock.setblocking(False)
    return sock


class _Reader:
    """Bytes from a non-blocking socket, waiting in short polls so a cancel is seen at once."""

    def __init__(self, sock: socket.socket, ep: Endpoint, limits: Limits, cancel: threading.Event) -> None:
        self.sock, self.ep, self.limits, self.cancel = sock, ep, limits, cancel
        self.deadline: float | None = None  # time.monotonic() at which to give up
        self.buf = b""
        self.eof = False

    def fill(self) -> None:
        """Read at least one more byte into buf, or set eof."""
        silent_since = time.monotonic()
        while True:
            if self.cancel.is_set():
                raise Cancelled
            now = time.monotonic()
            if self.deadline is not None and now >= self.deadline:
                raise DeadlineReached
            if now - silent_since >= self.limits.read_s:
                raise HttpError(f"no answer from {self.ep} in {self.limits.read_s:g} s")
            pending = isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()
            if pending or select.select([self.sock], [], [], POLL_S)[0]:
                try:
                    data = self.sock.recv(65536)
                except (BlockingIOError, ssl.SSLWantReadError):
                    continue
                except OSError as exc:
                    raise HttpError(f"{self.ep} closed the connection: {exc.strerror or exc}") from None
                if not data:
                    self.eof = True
                else:
                    self.buf += data
                return

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self.fill()
            if self.eof:
                raise HttpError(f"{self.ep} closed the connection mid-response")
        out, self.buf = self.buf.split(b"\r\n", 1)
        return out

    def take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self.fill()
            if self.eof:
                raise HttpError(f"{self.ep} closed the connection mid-response")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def _body(reader: _Reader, headers: dict[str, str]) -> Iterator[bytes]:
    """The response body as it arrives: chunked, sized, or up to the end of the connection."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size = int(reader.line().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                return
            yield reader.take(size)
            reader.take(2)  # the chunk's CRLF
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            if not reader.buf:
                reader.fill()
                if reader.eof:
                    raise HttpError(f"{reader.ep} closed the connection mid-response")
            part, reader.buf = reader.buf[:left], reader.buf[left:]
            left -= len(part)
            yield part
    else:
        while True:
            if reader.buf:
                part, reader.buf = reader.buf, b""
                yield part
            reader.fill()
            if reader.eof:
                if reader.buf:
                    yield reader.buf
                return


def _error_text(status: int, reason: str, body: bytes) -> str:
    """`500 Internal Server Error: <the server's own message>`, as short as it can be."""
    message = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(message)
        err = data.get("error", data.get("detail", data)) if isinstance(data, dict) else data
        message = err.get("message", json.dumps(err)) if isinstance(err, dict) else str(err)
    except ValueError:
        pass
    return f"{status} {reason}" + (f": {message[:300]}" if message else "")


class Response:
    def __init__(self, status: int, reason: str, headers: dict[str, str], chunks: Iterator[bytes],
                 reader: _Reader) -> None:
        self.status, self.reason, self.headers, self.chunks = status, reason, headers, chunks
        self._reader = reader

    def close_at(self, deadline: float | None) -> None:
        """From now on, close the stream at `deadline` (time.monotonic()): DeadlineReached."""
        self._reader.deadline = deadline

    def events(self) -> Iterator[str]:
        """Server-sent events' data fields; a plain JSON body is one event."""
        if "text/event-stream" not in self.headers.get("content-type", ""):
            yield b"".join(self.chunks).decode("utf-8", "replace")
            return
        pending = b""
        for chunk in self.chunks:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for ln in lines:
                if ln.startswith(b"data:"):  # strip() also takes the \r of CRLF lines
                    yield ln[5:].strip().decode("utf-8", "replace")
        if pending.startswith(b"data:"):
            yield pending[5:].strip().decode("utf-8", "replace")


@contextlib.contextmanager
def request(method: str, ep: Endpoint, path: str, body: dict | None, limits: Limits,
            cancel: threading.Event | None = None, headers: dict[str, str] | None = None) -> Iterator[Response]:
    """Send one request; the response once its headers are in. The connection is closed
    when the with-block ends, however it ends (done, cancelled, failed).
    A status other than 2xx raises HttpError with the server's message."""
    cancel = cancel or threading.Event()
    sock = _connect(ep, limits, cancel)
    try:
        payload = json.dumps(body).encode() if body is not None else b""
        head = [f"{method} {ep.base}{path} HTTP/1.1", f"Host: {ep.host}:{ep.port}", "Connection: close",
                "Accept: text/event-stream, application/json", f"Content-Length: {len(payload)}"]
        if body is not None:
            head.append("Content-Type: application/json")
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        sock.setblocking(True)
        sock.settimeout(limits.read_s)
        try:
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        except OSError as exc:
            raise HttpError(f"{ep} closed the connection: {exc.strerror or exc}") from None
        sock.setblocking(False)
        reader = _Reader(sock, ep, limits, cancel)
        status_line = reader.line().decode("latin-1")
        try:
            _, code, *reason = status_line.split(" ", 2)
            status = int(code)
        except ValueError:
            raise HttpError(f"{ep} does not speak HTTP: {status_line[:80]!r}") from None
        hdrs: dict[str, str] = {}
        while line := reader.line():
            name, _, value = line.decode("latin-1").partition(":")
            hdrs[name.strip().lower()] = value.strip()
        chunks = _body(reader, hdrs)
        if not 200 <= status < 300:
            data = b""
            for part in chunks:
                data += part
                if len(data) > MAX_ERROR_BODY:
                    break
            raise HttpError(f"{ep}{path}: {_error_text(status, reason[0] if reason else '', data)}")
        yield Response(status, reason[0] if reason else "", hdrs, chunks, reader)
    finally:
        sock.close()  # closing the stream is how a server learns to stop generating
