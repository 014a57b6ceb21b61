"""`specfill status`: what the shared server of this install is doing, asked over its socket
(`specfill/sharedStatus`, answered by `WorkerPool.status`)."""

from __future__ import annotations

import itertools
import json
import socket
import sys
import time
from pathlib import Path

from lsp_server.shared import attach


def _request(sock: socket.socket, method: str, params: dict, timeout_s: float = 10.0) -> dict:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sock.settimeout(timeout_s)
    stream = sock.makefile("rb")
    for _ in itertools.count():
        length = 0
        while (line := stream.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if not length:
            raise ConnectionError("the shared server closed the connection")
        message = json.loads(stream.read(length))
        if message.get("id") == 1 and "method" not in message:
            if "error" in message:
                raise ConnectionError(message["error"].get("message", "error"))
            return message["result"]
    raise AssertionError("unreachable")


def main(socket_arg: str | None, as_json: bool) -> int:
    try:
        path = Path(socket_arg) if socket_arg else attach.socket_path()
        sock = attach.dial(path)
        if sock is None:
            print(f"no shared server answers at {path} (an editor starts it; so does `specfill attach`)")
            return 1
        with sock:
            status = _request(sock, "specfill/sharedStatus", {})
    except (attach.AttachError, OSError, ValueError) as exc:
        print(f"specfill: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps({"socket": str(path), **status}, indent=2))
        return 0
    print(f"shared server {status['version']} (pid {status['pid']}, {status['build']} build) at {path}")
    print(f"memory: {status['rss_mb']:.0f} MB resident")
    print(f"sessions: {len(status['sessions'])}")
    for s in status["sessions"]:
        minutes = (time.time() - s["since"]) / 60
        print(f"  {s['editor']}: {', '.join(s['folders']) or '(no folder)'} ({minutes:.0f} min)")
    print(f"models: {len(status['models'])}")
    for m in status["models"]:
        print(f"  {m['model']}: {m['state']}, {m['sessions']} session(s)")
    return 0
