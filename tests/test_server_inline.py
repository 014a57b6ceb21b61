"""The real server over stdio with a real LSP client (pytest-lsp), on the embedded model."""

import asyncio
import statistics
import time

import pytest
from lsp_helpers import TEXT, URI, client_fixture, complete, end_of, field, open_doc, stats, wait_ready
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.editor_sample import SOURCE

client = client_fixture({"model": {"path": ""}})
bad_client = client_fixture({"model": {"path": "/nonexistent/model.gguf"}})


@pytest.mark.asyncio
async def test_capability_advertised(client: LanguageClient):
    caps = client.init_result.capabilities
    assert caps.inline_completion_provider is not None
    assert caps.completion_provider is not None
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental


@pytest.mark.asyncio
async def test_inline_completion_continues_prefix(client: LanguageClient):
    await wait_ready(client)
    open_doc(client)
    result = await complete(client, *end_of(TEXT))
    assert isinstance(result, types.InlineCompletionList)
    assert result.items, "expected a suggestion"
    text = result.items[0].insert_text
    assert text.strip()
    assert "side" in text  # continues `return ` inside area_of_square


# About 100 tokens: a small file, read well within the default prompt budget (300 ms).
SMALL_FILE = (SOURCE + "    return width * height\n\n\n"
              "def area_of_triangle(base: float, height: float) -> float:\n    return ")


def read_ms(engine, text: str) -> float:
    """What reading `text` as a prompt takes this machine now: the median of three reads."""
    tokens = engine.tokenize(text)
    times = []
    for _ in range(3):
        engine.reset()
        t0 = time.perf_counter()
        engine.prefill(tokens)
        times.append((time.perf_counter() - t0) * 1000)
    engine.reset()
    return statistics.median(times)


@pytest.mark.asyncio
async def test_a_small_file_is_answered_from_its_full_prompt_on_a_fresh_server(client: LanguageClient, engine):
    """A fresh server has read no prompt yet: its estimate of the read rate comes from what
    the cost profile measured reading a prompt, so a file that reads well within the budget
    (twice what reading it takes this machine now) is read whole, not answered from its
    nearest lines. (An estimate from the verify costs was ~3x too slow for a small file.)"""
    await wait_ready(client)
    rate = field(await stats(client), "prompt_tok_s")
    assert rate > 0
    budget = max(30, round(2 * read_ms(engine, SMALL_FILE)))
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"specfill": {"completion": {"promptBudgetMs": budget}}}))
    open_doc(client, SMALL_FILE)
    await complete(client, *end_of(SMALL_FILE), invoked=False)
    s = await stats(client)
    assert field(field(s, "ttft_cold_ms"), "n") == 1  # one generation, from the whole file
    assert field(s, "short") == 0 and field(s, "read_ahead_tokens") == 0, f"{rate:.0f} tokens/s, budget {budget} ms"


@pytest.mark.asyncio
async def test_unknown_uri_and_bad_position_get_empty_answers(client: LanguageClient):
    await wait_ready(client)
    open_doc(client)
    result = await complete(client, 0, 0, uri="file:///tmp/specfill-test/never-opened.py")
    assert not result.items
    result = await complete(client, 500, 3)
    assert not result.items
    result = await complete(client, 0, 400)  # past the end of the line
    assert not result.items
    # the server still serves afterwards
    result = await complete(client, *end_of(TEXT))
    assert result.items


@pytest.mark.asyncio
async def test_missing_model_is_shown_and_server_stays_up(bad_client: LanguageClient):
    open_doc(bad_client)
    await bad_client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
    assert any("/nonexistent/model.gguf" in m.message for m in bad_client.messages)
    result = await complete(bad_client, 1, 0)
    assert not result.items


@pytest.mark.asyncio
async def test_invoked_request_returns_distinct_candidates(client: LanguageClient):
    await wait_ready(client)
    open_doc(client)
    line, col = end_of(TEXT)
    invoked = (await complete(client, line, col)).items
    texts = [item.insert_text for item in invoked]
    assert 2 <= len(texts) <= 3 and len(set(texts)) == len(texts)
    automatic = (await complete(client, line, col, invoked=False)).items
    assert len(automatic) == 1 and automatic[0].insert_text == texts[0]  # the greedy one first


@pytest.mark.asyncio
async def test_a_place_named_while_the_model_loads_is_read_once_it_is_ready(client: LanguageClient):
    """An editor opens with a file: its didFocus arrives while the model still loads, and is
    acted on when the model is ready, not dropped (VS Code sends no other until the cursor moves)."""
    open_doc(client, SMALL_FILE)
    line, col = end_of(SMALL_FILE)
    client.protocol.notify("specfill/didFocus", {"textDocument": {"uri": URI}, "position": {"line": line,
                                                                                          "character": col}})
    await wait_ready(client)
    for _ in range(100):
        if field(await stats(client), "read_ahead_tokens") > 0:
            break
        await asyncio.sleep(0.1)
    assert field(await stats(client), "read_ahead_tokens") > 0
