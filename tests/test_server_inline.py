"""The real server over stdio with a real LSP client (pytest-lsp), on the embedded model."""

import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

URI = "file:///tmp/specfill-test/shapes.py"
TEXT = (
    "import math\n\n\ndef area_of_circle(radius):\n    return math.pi * radius ** 2\n\n\n"
    "def area_of_square(side):\n    return "
)


def make_client_fixture(init_options):
    @pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "lsp_server", "serve"]))
    async def client(lsp_client: LanguageClient):
        lsp_client.init_result = await lsp_client.initialize_session(types.InitializeParams(
            capabilities=types.ClientCapabilities(), initialization_options=init_options))
        yield
        await lsp_client.shutdown_session()

    return client


client = make_client_fixture({"model": {"path": ""}})
bad_client = make_client_fixture({"model": {"path": "/nonexistent/model.gguf"}})


def open_doc(lsp_client, text=TEXT, uri=URI):
    lsp_client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))


async def complete(lsp_client, line, character, uri=URI):
    return await lsp_client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=character),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)))


@pytest.mark.asyncio
async def test_capability_advertised(client: LanguageClient):
    caps = client.init_result.capabilities
    assert caps.inline_completion_provider is not None
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental


@pytest.mark.asyncio
async def test_inline_completion_continues_prefix(client: LanguageClient):
    open_doc(client)
    lines = TEXT.split("\n")
    result = await complete(client, len(lines) - 1, len(lines[-1]))
    assert isinstance(result, types.InlineCompletionList)
    assert result.items, "expected a suggestion"
    text = result.items[0].insert_text
    assert text.strip()
    assert "side" in text  # continues `return ` inside area_of_square


@pytest.mark.asyncio
async def test_unknown_uri_and_bad_position_get_empty_answers(client: LanguageClient):
    open_doc(client)
    result = await complete(client, 0, 0, uri="file:///tmp/specfill-test/never-opened.py")
    assert not result.items
    result = await complete(client, 500, 3)
    assert not result.items
    # the server still serves afterwards
    lines = TEXT.split("\n")
    result = await complete(client, len(lines) - 1, len(lines[-1]))
    assert result.items


@pytest.mark.asyncio
async def test_missing_model_is_shown_and_server_stays_up(bad_client: LanguageClient):
    open_doc(bad_client)
    await bad_client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
    assert any("/nonexistent/model.gguf" in m.message for m in bad_client.messages)
    result = await complete(bad_client, 1, 0)
    assert not result.items
