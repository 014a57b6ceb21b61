"""The server's log reaches the editor (window/logMessage) at the logLevel setting, and a file
with --log-file: model load, settings, one line per generation, failures with tracebacks."""

import asyncio
import subprocess
import sys
import time

import pytest
from lsp_helpers import TEXT, client_fixture, complete, end_of, open_doc, wait_ready
from lsprotocol import types
from pytest_lsp import LanguageClient

client = client_fixture({"specfill": {"logLevel": "debug", "completion": {"minConfidence": 0, "debounceMs": 0}}})
quiet = client_fixture({"specfill": {"logLevel": "warning", "completion": {"minConfidence": 0, "debounceMs": 0}}})


def logged(client: LanguageClient) -> str:
    return "\n".join(f"[{m.type.name}] {m.message}" for m in client.log_messages)


@pytest.mark.asyncio
async def test_debug_log_has_load_settings_and_one_line_per_generation(client: LanguageClient):
    await wait_ready(client)
    open_doc(client)
    assert (await complete(client, *end_of(TEXT))).items
    await asyncio.sleep(0.2)
    text = logged(client)
    settings = "completion.debounceMs=0, completion.minConfidence=0.0, logLevel='debug'"
    assert f"[Info] settings from initialize: {settings}" in text
    assert "[Info] model loaded in" in text and "SmolLM2" in text
    assert "[Log] generation: " in text and "prompt" in text and "stop " in text and "ttft" in text


@pytest.mark.asyncio
async def test_failures_are_logged_with_their_traceback(client: LanguageClient):
    await wait_ready(client)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"specfill": {"logLevel": "debug", "model": {"path": "/nonexistent/model.gguf"}}}))
    for _ in range(100):
        if "model not loaded" in logged(client):
            break
        await asyncio.sleep(0.1)
    text = logged(client)
    assert "[Error] model not loaded: model file not found: /nonexistent/model.gguf" in text
    assert "Traceback (most recent call last)" in text and "ModelError" in text


@pytest.mark.asyncio
async def test_warning_level_hides_info_and_debug(quiet: LanguageClient):
    await wait_ready(quiet)
    open_doc(quiet)
    await complete(quiet, *end_of(TEXT))
    await asyncio.sleep(0.2)
    assert not quiet.log_messages, logged(quiet)


def test_log_file(tmp_path):
    log = tmp_path / "specfill.log"
    proc = subprocess.Popen([sys.executable, "-m", "lsp_server", "serve", "--log-file", str(log)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        body = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}'
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while "settings from initialize" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, "nothing logged"
            time.sleep(0.1)
        assert " INFO settings from initialize: defaults" in log.read_text()
    finally:
        proc.kill()
        proc.wait(10)
    bad = subprocess.run([sys.executable, "-m", "lsp_server", "serve", "--log-file", str(tmp_path / "no" / "x.log")],
                         capture_output=True, text=True, timeout=60, input="", check=False)
    assert bad.returncode == 2 and "cannot write the log file" in bad.stderr
