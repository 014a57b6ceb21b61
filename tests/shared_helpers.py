"""The shared server under test: editors' sessions through `specfill attach`, each test with
its own runtime folder (so its own socket and daemon), the daemons killed at the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient
from pytest_lsp.client import make_test_lsp_client

from bench.lsp_client import shared_server_pids

ATTACH = [sys.executable, "-m", "lsp_server", "attach"]


def shared_env(root: Path, **extra: str) -> dict:
    run = root / "run"
    run.mkdir(mode=0o700, parents=True, exist_ok=True)
    return {**os.environ, "XDG_RUNTIME_DIR": str(run), **extra}


def socket_of(env: dict) -> Path:
    code = "from lsp_server.shared.attach import socket_path; print(socket_path())"
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def daemon_log(env: dict) -> str:
    log = socket_of(env).with_suffix(".log")
    return log.read_text() if log.exists() else ""


def daemon_pids(env: dict) -> list[int]:
    """Every shared server started for this runtime folder, in order."""
    return shared_server_pids(Path(env["XDG_RUNTIME_DIR"]))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (its parent, an attach, has not reaped it yet) is gone for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def kill_daemons(env: dict) -> None:
    kill_shared_servers(Path(env["XDG_RUNTIME_DIR"]))


def kill_shared_servers(runtime: Path) -> None:
    for pid in shared_server_pids(runtime):
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def wait_until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
    return result


async def attach_client(env: dict, init_options: dict | None = None, name: str = "test-editor",
                        args: tuple[str, ...] = ()) -> LanguageClient:
    """An editor's session: `specfill attach` over stdio, initialized."""
    client = make_test_lsp_client()
    await client.start_io(*ATTACH, *args, env=env)
    await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), initialization_options=init_options or {},
        client_info=types.ClientInfo(name=name)))
    return client


def status(env: dict) -> dict:
    out = subprocess.run([sys.executable, "-m", "lsp_server", "status", "--json"], env=env, check=True,
                         capture_output=True, text=True, timeout=30)
    return json.loads(out.stdout)
