"""The workspace indexer inside the real server: folders from initialize, counts in
specfill/stats, kept current while serving, off with context.workspace = false."""

import asyncio
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsp_helpers import SERVER, field, stats, wait_ready
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

WS = Path(tempfile.mkdtemp(prefix="specfill-ws-"))
(WS / "shapes.py").write_text("def area_of_square(side):\n    return side ** 2\n")
(WS / "notes.md").write_text("# notes\n")
(WS / ".gitignore").write_text("*.secret\n")
(WS / "key.secret").write_text("hunter2\n")
(WS / "blob.bin").write_bytes(bytes(range(256)))


def workspace_client(settings):
    @pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
    async def client(lsp_client: LanguageClient):
        await lsp_client.initialize_session(types.InitializeParams(
            capabilities=types.ClientCapabilities(), initialization_options=settings,
            workspace_folders=[types.WorkspaceFolder(uri=WS.as_uri(), name="ws")]))
        yield
        await lsp_client.shutdown_session()

    return client


client = workspace_client({})
off_client = workspace_client({"context": {"workspace": False}})


async def workspace_stats(client) -> dict:
    for _ in range(100):
        ws = field(await stats(client), "workspace")
        if ws is not None and field(ws, "scanned"):
            return ws
        await asyncio.sleep(0.1)
    raise AssertionError("workspace never scanned")


@pytest.mark.asyncio
async def test_indexes_the_workspace_folder_and_follows_changes(client: LanguageClient):
    await wait_ready(client)
    ws = await workspace_stats(client)
    assert field(ws, "roots") == [str(WS.resolve())]
    assert field(ws, "files") == 3  # shapes.py, notes.md, .gitignore; not the ignored or binary file
    (WS / "more.py").write_text("x = 1\n")
    try:
        for _ in range(100):
            if field(await workspace_stats(client), "files") == 4:
                break
            await asyncio.sleep(0.1)
        assert field(await workspace_stats(client), "files") == 4
    finally:
        (WS / "more.py").unlink()


@pytest.mark.asyncio
async def test_context_workspace_false_reads_nothing(off_client: LanguageClient):
    await wait_ready(off_client)
    assert field(await stats(off_client), "workspace") is None
