"""Faults while serving: the model file truncated or deleted under a running server."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from lsp_helpers import TEXT, client_fixture, complete, end_of, field, open_doc, stats, wait_ready
from pytest_lsp import LanguageClient

from speculative import resolve_model_path

MODEL = Path(tempfile.mkdtemp(prefix="specfill-fault-")) / "model.gguf"
shutil.copy(resolve_model_path(None), MODEL)

client = client_fixture({"specfill": {"model": {"path": str(MODEL)}, "completion": {"debounceMs": 0}}})


@pytest.mark.asyncio
async def test_model_file_truncated_then_deleted_while_serving(client: LanguageClient):
    """The weights live in memory (not mmapped), so a file rewritten in place cannot kill
    the server with SIGBUS; it keeps serving."""
    await wait_ready(client)
    open_doc(client)
    line, col = end_of(TEXT)
    assert (await complete(client, line, col)).items
    os.truncate(MODEL, 1000)
    steps = field(await stats(client), "decode_steps")
    other = "file:///tmp/specfill-test/other.py"
    open_doc(client, "def add(a, b):\n    return ", uri=other)
    assert (await complete(client, 1, 11, uri=other)).items  # new decoding on the same weights
    assert field(await stats(client), "decode_steps") > steps
    MODEL.unlink()
    third = "file:///tmp/specfill-test/third.py"
    open_doc(client, "def sub(a, b):\n    return ", uri=third)
    assert (await complete(client, 1, 11, uri=third)).items
    s = await stats(client)
    assert field(s, "state") == "ready" and field(s, "errors") == 0
