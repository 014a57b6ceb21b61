"""Real servers on loopback for the remote-engine tests: llama-cpp-python's OpenAI server and
llama.cpp's llama-server with the embedded model, and two small misbehaving peers (one
that never answers, one that answers 500)."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LLAMA_SERVER = ROOT / ".tools" / "llama-server" / "llama-server"  # built by `make llama-server`


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Engine:
    """A serving engine in its own process (group), on 127.0.0.1."""

    def __init__(self, argv: list[str], port: int, health: str, log: Path) -> None:
        self.port, self.url = port, f"http://127.0.0.1:{port}"
        self.log = log
        self.proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"engine exited: {log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(self.url + health, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"engine did not start: {log.read_text()[-2000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def openai_engine(model: Path, log_dir: Path, port: int | None = None) -> Engine:
    port = port or free_port()
    argv = [sys.executable, str(ROOT / "tests" / "openai_engine.py"), "--model", str(model), "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", "2048", "--n_threads", "1"]
    return Engine(argv, port, "/v1/models", log_dir / f"openai-{port}.log")


def llama_server(model: Path, log_dir: Path, extra: list[str] = (), port: int | None = None) -> Engine:
    assert LLAMA_SERVER.exists(), f"{LLAMA_SERVER} is missing: run `make llama-server` (make test does)"
    port = port or free_port()
    argv = [str(LLAMA_SERVER), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "2048",
            "-t", "1", "-np", "1", "--no-ui", "--no-repack", *extra]  # repacking takes the AMX path that crashes here
    return Engine(argv, port, "/health", log_dir / f"llama-server-{port}.log")


class Silent:
    """Accepts connections and reads requests, never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.accepted:
            c.close()


class Failing:
    """Answers every request with one status and an OpenAI-style error body; counts requests.
    With `delay_s` it starts listening only after that long (a server coming up)."""

    def __init__(self, status: int = 500, message: str = "out of memory in slot 0", port: int | None = None,
                 delay_s: float = 0.0) -> None:
        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                outer.requests += 1
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST  # noqa: N815

            def log_message(self, *args) -> None:
                pass

        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server: http.server.ThreadingHTTPServer | None = None
        self._handler = Handler
        self._started = threading.Timer(delay_s, self._start) if delay_s else None
        if self._started:
            self._started.start()
        else:
            self._start()

    def _start(self) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        if self._started:
            self._started.cancel()
            self._started.join()
        if self.server:
            self.server.shutdown()
            self.server.server_close()


class Recorder:
    """A loopback proxy in front of an engine: keeps the body of every request it forwards
    (what the engine received) and streams the engine's answer back as it comes."""

    def __init__(self, target: str, port: int = 0) -> None:
        self.bodies: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self, body: bytes | None) -> None:
                req = urllib.request.Request(target + self.path, body, method=self.command,
                                             headers={"Content-Type": "application/json"})
                try:
                    resp = urllib.request.urlopen(req, timeout=60)
                except urllib.error.HTTPError as exc:
                    resp = exc
                self.send_response(resp.status)
                for key, value in resp.headers.items():
                    if key.lower() not in ("connection", "content-length", "transfer-encoding"):
                        self.send_header(key, value)
                self.send_header("Connection", "close")  # the body ends when the connection does
                self.end_headers()
                while chunk := resp.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.bodies.append(body.decode("utf-8", "replace"))
                self._forward(body)

            def do_GET(self) -> None:  # noqa: N802
                self._forward(None)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
