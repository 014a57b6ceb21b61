"""The real server over stdio, as the tools drive it: started, initialized, model loaded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient


async def server_stats(client: LanguageClient) -> dict:
    """specfill/stats as a dict (pygls hands custom results back as namedtuples)."""
    result = await client.protocol.send_request_async("specfill/stats", {})
    if isinstance(result, dict):
        return result
    return _plain(result)


def _plain(value):
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


async def start_server(name: str, settings: dict | None = None, capabilities: types.ClientCapabilities | None = None,
                       wait_ready: bool = True, workspace: str | None = None, command: tuple[str, ...] = ("serve",),
                       env: dict | None = None) -> LanguageClient:
    """A client of a fresh `specfill serve` (or of `command`: `attach` for a session of the
    shared server), initialized with `settings` (and `workspace` as its one workspace folder);
    with `wait_ready`, returned once the model is loaded and the workspace indexed."""
    client = LanguageClient(name, "0.1")

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def _log(params: types.LogMessageParams) -> None:
        """The server's log is for editors; the tools print their own figures."""

    @client.feature("specfill/inlineCompletion/refresh")
    def _refresh(params) -> None:
        """An editor asks again when the cursor rests; the bench typist's next key comes first."""

    await client.start_io(sys.executable, "-m", "lsp_server", *command, env=env)
    folder = types.WorkspaceFolder(uri=Path(workspace).resolve().as_uri(), name=Path(workspace).name) \
        if workspace else None
    await client.initialize_async(types.InitializeParams(
        capabilities=capabilities or types.ClientCapabilities(), root_uri=folder.uri if folder else None,
        workspace_folders=[folder] if folder else None,
        initialization_options={"specfill": settings or {}}))
    client.initialized(types.InitializedParams())
    while wait_ready and not _ready(await server_stats(client), bool(workspace)):
        await asyncio.sleep(0.1)
    return client


def _ready(stats: dict, indexing: bool) -> bool:
    """The model loaded and, when asked for, the workspace scanned (or its indexing off)."""
    workspace = stats.get("workspace")
    return stats["state"] != "loading" and (not indexing or workspace is None or bool(workspace.get("scanned")))


def server_pid(client: LanguageClient) -> int:
    """The pid of the process the client started (the server, or `specfill attach`)."""
    if client._server is None:
        raise RuntimeError("the client has no server process")
    return client._server.pid


async def stop_server(client: LanguageClient) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


async def shared_status(client: LanguageClient) -> dict:
    """specfill/sharedStatus: the server's pid, sessions and models."""
    return _plain(await client.protocol.send_request_async("specfill/sharedStatus", {}))


def shared_server_pids(runtime: str | Path) -> list[int]:
    """The shared servers started under a runtime folder (a bench's, an editor's, a test's),
    from their logs, in order."""
    return [int(pid) for log in sorted(Path(runtime).glob("specfill/*.log"))
            for pid in re.findall(r"listening on \S+ \(pid (\d+)", log.read_text())]


def kill_shared(runtime: str | Path) -> None:
    for pid in shared_server_pids(runtime):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
