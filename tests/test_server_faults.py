"""Faults while serving: the model or draft model file truncated, deleted or missing; a cache
dir on a full disk. Each is said to the editor, and the server keeps serving."""

import asyncio
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

client = client_fixture({"specfill": {"model": {"path": str(MODEL)},
                                      "completion": {"minConfidence": 0, "debounceMs": 0}}})


async def still_serves(client, name: str) -> None:
    """A suggestion in a new document, and a server that says it is ready with no errors."""
    uri = f"file:///tmp/specfill-test/{name}.py"
    open_doc(client, "def add(a, b):\n    return ", uri=uri)
    assert (await complete(client, 1, 11, uri=uri)).items
    s = await stats(client)
    assert field(s, "state") == "ready" and field(s, "errors") == 0


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
    await still_serves(client, "other")
    assert field(await stats(client), "decode_steps") > steps, "new decoding on the same weights"
    MODEL.unlink()
    await still_serves(client, "third")


DRAFT = Path(tempfile.mkdtemp(prefix="specfill-draft-")) / "draft.gguf"
shutil.copy(resolve_model_path(None), DRAFT)
MISSING_DRAFT = "/nonexistent/specfill/draft.gguf"
missing_draft_client = client_fixture({"specfill": {"model": {"draftPath": MISSING_DRAFT},
                                                    "speculation": {"method": "draft"},
                                                    "completion": {"minConfidence": 0, "debounceMs": 0}}})
draft_client = client_fixture({"specfill": {"model": {"draftPath": str(DRAFT)}, "speculation": {"method": "draft"},
                                            "completion": {"minConfidence": 0, "debounceMs": 0}}})

# A cache dir whose cost table cannot be written: the temporary file it is written through
# is /dev/full, so the write fails with ENOSPC from the kernel, as on a full disk.
FULL_CACHE = Path(tempfile.mkdtemp(prefix="specfill-full-cache-"))
(FULL_CACHE / "verify_costs.tmp").symlink_to("/dev/full")
full_cache_client = client_fixture({"specfill": {"completion": {"minConfidence": 0, "debounceMs": 0}}},
                                   env={"SPECFILL_CACHE_DIR": str(FULL_CACHE)})


async def told(client, text: str, timeout: float = 10.0) -> list[str]:
    """The showMessage texts containing `text`, waiting a little for them to arrive."""
    for _ in range(int(timeout * 10)):
        found = [m.message for m in client.messages if text in m.message]
        if found:
            return found
        await asyncio.sleep(0.1)
    return []


@pytest.mark.asyncio
async def test_missing_draft_model_is_named_and_the_target_serves(missing_draft_client: LanguageClient):
    await wait_ready(missing_draft_client)
    (message,) = await told(missing_draft_client, "draft model not used")
    assert MISSING_DRAFT in message
    open_doc(missing_draft_client)
    line, col = end_of(TEXT)
    assert (await complete(missing_draft_client, line, col)).items
    s = await stats(missing_draft_client)
    assert field(s, "draft_model") is None and field(s, "errors") == 0 and field(s, "state") == "ready"


@pytest.mark.asyncio
async def test_draft_model_deleted_while_serving(draft_client: LanguageClient):
    await wait_ready(draft_client)
    assert field(await stats(draft_client), "draft_model") == str(DRAFT)
    open_doc(draft_client)
    line, col = end_of(TEXT)
    assert (await complete(draft_client, line, col)).items
    os.truncate(DRAFT, 1000)
    DRAFT.unlink()
    await still_serves(draft_client, "other")


@pytest.mark.asyncio
async def test_full_cache_dir_is_said_and_the_server_serves(full_cache_client: LanguageClient):
    await wait_ready(full_cache_client)
    (message,) = await told(full_cache_client, "cost table not saved")
    assert "No space left on device" in message and str(FULL_CACHE) in message
    assert not (FULL_CACHE / "verify_costs.json").exists()
    assert not (FULL_CACHE / "verify_costs.tmp").exists(), "the partial file is removed, freeing what it took"
    open_doc(full_cache_client)
    line, col = end_of(TEXT)
    assert (await complete(full_cache_client, line, col)).items
    assert field(await stats(full_cache_client), "errors") == 0
