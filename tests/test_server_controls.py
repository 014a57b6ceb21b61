"""Everyday controls over LSP, on the real server: no suggestions in a language turned off or
in a file kept out of prompts, and manual mode answering only the trigger key."""

import pytest
from lsp_helpers import TEXT, client_fixture, complete, end_of, field, open_doc, stats, wait_ready
from lsprotocol import types
from pytest_lsp import LanguageClient

SECRET = "SPECFILL_TEST_SECRET_7f3a = 'hunter2-9d1c'\n"
SURE = {"debounceMs": 0, "minConfidence": 0, "budgetMs": 20000, "afterAccept": False}


def open_as(client, uri: str, text: str, language: str) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))


async def generations(client) -> int:
    """How many times the model was asked."""
    s = await stats(client)
    return field(field(s, "ttft_cold_ms"), "n") + field(field(s, "ttft_warm_ms"), "n")


client = client_fixture({"specfill": {"completion": SURE}})
manual = client_fixture({"specfill": {"completion": {**SURE, "trigger": "manual"}}})


@pytest.mark.asyncio
async def test_no_suggestions_in_a_language_turned_off_or_a_file_kept_out(client: LanguageClient):
    await wait_ready(client)
    notes, env = "file:///tmp/specfill-test/notes.md", "file:///tmp/specfill-test/.env"
    open_as(client, notes, "# Notes\n\nThe area of a square is ", "markdown")
    open_as(client, env, SECRET + "SPECFILL_TEST_SECRET_", "dotenv")
    assert not (await complete(client, 2, 31, uri=notes, invoked=False)).items
    assert not (await complete(client, 1, 21, uri=env, invoked=True)).items
    assert await generations(client) == 0  # the model was not asked
    open_doc(client)
    assert (await complete(client, *end_of(TEXT), invoked=False)).items  # code is served


@pytest.mark.asyncio
async def test_manual_mode_answers_only_the_trigger_key(manual: LanguageClient):
    await wait_ready(manual)
    open_doc(manual)
    assert not (await complete(manual, *end_of(TEXT), invoked=False)).items
    assert await generations(manual) == 0
    assert (await complete(manual, *end_of(TEXT), invoked=True)).items  # the trigger key: an Invoked request
