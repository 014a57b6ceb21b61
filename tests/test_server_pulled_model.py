"""A model pulled on request serves completions through the real server: the editors' flow
(pull, then set model.path to the name of the list) against a hub on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_server.models.catalog import BY_NAME
from speculative import resolve_model_path
from tests.hub_server import Hub
from tests.lsp_helpers import client_fixture, complete, field, open_doc, stats, wait_ready

TARGET = BY_NAME["qwen2.5-coder-1.5b"]  # pulled by no other test into the session's cache
CACHE = Path(os.environ["SPECFILL_CACHE_DIR"])  # tests/conftest.py's: the served bytes' profile is measured once

# Weights as shipped: this test is about finding the pulled file, not converting it.
client = client_fixture({"specfill": {"model": {"weights": "shipped"}, "completion": {"minConfidence": 0}}})


@pytest.mark.asyncio
async def test_a_pulled_model_of_the_list_serves_once_model_path_names_it(client: LanguageClient):
    await wait_ready(client)
    hub = Hub(files={(TARGET.repo, TARGET.file): resolve_model_path(None).read_bytes()})
    try:
        out = subprocess.run([sys.executable, "-m", "lsp_server", "model", "pull", TARGET.name, "--json"],
                             env={**os.environ, "HF_ENDPOINT": hub.url, "SPECFILL_CACHE_DIR": str(CACHE),
                                  "HF_HOME": str(CACHE / "hf")},
                             capture_output=True, text=True, timeout=120, check=False)
    finally:
        hub.close()
    done = json.loads(out.stdout.splitlines()[-1])
    assert done["event"] == "done", out.stderr
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"specfill": {"model": {"path": TARGET.name, "weights": "shipped"},
                               "completion": {"minConfidence": 0}}}))
    for _ in range(600):
        s = await stats(client)
        if field(s, "state") == "ready" and str(field(s, "model")).endswith(TARGET.file):
            break
        assert field(s, "state") != "error", field(s, "error")
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"the pulled model never loaded: {s}")
    assert Path(field(s, "model")) == Path(done["path"])
    open_doc(client, "def add(a, b):\n    return ")
    assert (await complete(client, 1, 11)).items
