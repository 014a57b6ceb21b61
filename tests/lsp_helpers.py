"""Shared pieces of the end-to-end tests: a real server over stdio with pytest-lsp."""

import asyncio
import os
import sys

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

SERVER = [sys.executable, "-m", "lsp_server", "serve"]
URI = "file:///tmp/specfill-test/shapes.py"
TEXT = (
    "import math\n\n\ndef area_of_circle(radius):\n    return math.pi * radius ** 2\n\n\n"
    "def area_of_square(side):\n    return "
)

# One line of `1, ` repeated: the model goes on writing `1, ` for hundreds of tokens, its choice
# far ahead of the next at every one (test_model_premises.py checks that margin), so a test can
# count on a long generation on any CPU's kernels.
REPEATED = "x = [" + "1, " * 200


def client_fixture(init_options, capabilities=None, env=None):
    """A client of a fresh server; `env` adds to the server's environment."""
    @pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER,
                                                  server_env={**os.environ, **env} if env else None))
    async def client(lsp_client: LanguageClient):
        lsp_client.init_result = await lsp_client.initialize_session(types.InitializeParams(
            capabilities=capabilities or types.ClientCapabilities(), initialization_options=init_options))
        yield
        await lsp_client.shutdown_session()

    return client


def field(obj, name):
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


async def stats(client) -> dict:
    result = await client.protocol.send_request_async("specfill/stats", {})
    return result if isinstance(result, dict) else result._asdict() if hasattr(result, "_asdict") else vars(result)


async def wait_ready(client, timeout=120.0):
    for _ in range(int(timeout * 10)):
        s = await stats(client)
        if field(s, "state") == "ready":
            return s
        assert field(s, "state") != "error", field(s, "error")
        await asyncio.sleep(0.1)
    raise AssertionError("model did not load")


def open_doc(client, text=TEXT, uri=URI, version=1):
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))


def end_of(text):
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1])


def inline_params(line, character, uri=URI, invoked=True):
    kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    return types.InlineCompletionParams(text_document=types.TextDocumentIdentifier(uri=uri),
                                        position=types.Position(line=line, character=character),
                                        context=types.InlineCompletionContext(trigger_kind=kind))


async def complete(client, line, character, uri=URI, invoked=True):
    return await client.text_document_inline_completion_async(inline_params(line, character, uri, invoked))


def insert(client, uri, version, line, character, text):
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=line, character=character),
                              end=types.Position(line=line, character=character)), text=text)]))
