"""Every request gets an answer, written as raw bytes to a real server: params it cannot read
get InvalidParams at once, unknown methods MethodNotFound, broken JSON is skipped, and a
normal request afterwards is still served."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time

import pytest

INVALID_PARAMS, METHOD_NOT_FOUND = -32602, -32601
URI = "file:///tmp/specfill-raw/shapes.py"
TEXT = "def area_of_square(side):\n    return "


class RawClient:
    """Frames written and read by hand: nothing between the test and the server's parser."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "lsp_server", "serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.messages: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line or length is None:
                return
            self.messages.put(json.loads(out.read(length)))

    def send_bytes(self, body: bytes) -> None:
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def send(self, method: str, params, id_=None) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if id_ is not None:
            message["id"] = id_
        self.send_bytes(json.dumps(message).encode())

    def answer(self, id_, timeout: float = 10.0) -> dict:
        """The response to request `id_` (notifications and other answers are passed over)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                message = self.messages.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if message.get("id") == id_ and "method" not in message:
                return message
        raise AssertionError(f"no answer to request {id_!r} in {timeout} s")

    def call(self, method: str, params, id_) -> dict:
        self.send(method, params, id_)
        return self.answer(id_)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def inline(line, character, uri=URI) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character},
            "context": {"triggerKind": 1}}


@pytest.fixture
def raw():
    client = RawClient()
    assert "result" in client.call("initialize", {"capabilities": {}, "initializationOptions": {
        "specfill": {"completion": {"minConfidence": 0, "debounceMs": 0, "budgetMs": 30000}}}}, 1)
    client.send("initialized", {})
    deadline = time.monotonic() + 120
    while client.call("specfill/stats", {}, f"ready-{time.monotonic()}")["result"]["state"] != "ready":
        assert time.monotonic() < deadline, "model never loaded"
        time.sleep(0.1)
    client.send("textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python", "version": 1,
                                                          "text": TEXT}})
    yield client
    client.close()


def test_unreadable_requests_are_answered_and_serving_goes_on(raw: RawClient):
    method = "textDocument/inlineCompletion"
    t0 = time.monotonic()
    for id_, params in [(10, inline(-1, -5)), (11, inline(1, 2**40)), (12, inline("one", 4)),
                        (13, {"textDocument": {"uri": URI}, "context": {"triggerKind": 1}}), (14, [URI, 1, 4]),
                        (15, None), (16, inline(1, 4) | {"textDocument": 7})]:
        error = raw.call(method, params, id_).get("error")
        assert error is not None and error["code"] == INVALID_PARAMS, (params, error)
        assert method in error["message"]
    assert time.monotonic() - t0 < 5, "answered at once"
    # a number spelled as a string and a fractional one are answered too (read leniently)
    assert {"result", "error"} & set(raw.call(method, inline("1", 4), 19))
    assert {"result", "error"} & set(raw.call(method, inline(1.5, 4.0), 20))
    # an unknown method, broken JSON, a message that is no object, bad notifications
    assert raw.call("specfill/nonsense", {}, 21)["error"]["code"] == METHOD_NOT_FOUND
    raw.send_bytes(b'{"jsonrpc": "2.0", "id": 22, "method": ')
    raw.send_bytes(b"[1, 2, 3]")
    raw.send("textDocument/didChange", [1, 2])
    raw.send("textDocument/didOpen", {"textDocument": {"uri": 5}})
    # still serving: the document as opened, and a normal request gets a suggestion
    result = raw.call(method, inline(1, 11), 30)["result"]
    assert result["items"] and result["items"][0]["insertText"].strip()
    assert raw.proc.poll() is None
