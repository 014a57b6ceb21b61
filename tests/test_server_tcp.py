"""TCP mode: loopback unless a second flag says otherwise, and then a warning."""

import json
import socket
import subprocess
import sys
import time

from remote_helpers import free_port

SERVE = [sys.executable, "-m", "lsp_server", "serve"]


def listening(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp spells them) listening on `port`."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                local, state = row.split()[1], row.split()[3]
                addr, p = local.rsplit(":", 1)
                if state == "0A" and int(p, 16) == port:
                    out.append(addr)
    return out


def wait_listening(proc: subprocess.Popen, port: int) -> list[str]:
    for _ in range(200):
        assert proc.poll() is None, proc.stderr.read()
        if addrs := listening(port):
            return addrs
        time.sleep(0.05)
    raise AssertionError("server did not listen")


def rpc(sock: socket.socket, method: str, params: dict, id_: int) -> dict:
    body = json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()
    sock.sendall(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    data = b""
    while True:
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, rest = data.split(b"\r\n\r\n", 1)
        size = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
        while len(rest) < size:
            rest += sock.recv(65536)
        message, data = json.loads(rest[:size]), rest[size:]
        if message.get("id") == id_:
            return message


def test_tcp_listens_on_loopback_only_and_speaks_lsp():
    port = free_port()
    proc = subprocess.Popen([*SERVE, "--port", str(port)], stderr=subprocess.PIPE, text=True)
    try:
        assert wait_listening(proc, port) == ["0100007F"], "127.0.0.1 and nothing else"
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            init = rpc(sock, "initialize", {"processId": None, "rootUri": None, "capabilities": {}}, 1)
            assert "inlineCompletionProvider" in init["result"]["capabilities"]
            assert rpc(sock, "shutdown", None, 2)["result"] is None
    finally:
        proc.kill()
        proc.wait(10)


def test_other_addresses_need_an_explicit_flag():
    done = subprocess.run([*SERVE, "--port", str(free_port()), "--host", "0.0.0.0"], capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 2 and "--allow-remote-clients" in done.stderr and not done.stdout


def test_explicit_flag_listens_and_warns():
    port = free_port()
    proc = subprocess.Popen([*SERVE, "--port", str(port), "--host", "0.0.0.0", "--allow-remote-clients"],
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_listening(proc, port) == ["00000000"]
        assert "WARNING" in proc.stderr.readline()
    finally:
        proc.kill()
        proc.wait(10)
