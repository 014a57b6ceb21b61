"""The server's pipeline end to end: settings, reload, cache, supersede, cancel, fallback, stats."""

import asyncio

import pytest
from lsp_helpers import (
    REPEATED,
    TEXT,
    URI,
    client_fixture,
    complete,
    end_of,
    field,
    inline_params,
    insert,
    open_doc,
    stats,
    wait_ready,
)
from lsprotocol import types
from pytest_lsp import LanguageClient

CAPS = types.ClientCapabilities(
    window=types.WindowClientCapabilities(work_done_progress=True),
    workspace=types.WorkspaceClientCapabilities(configuration=True))
WORDS = "words = ['alpha', 'beta', 'gamma', 'delta', "  # goes on for many tokens on one line

# A generous budget: on a loaded machine the default 2 s can cut a suggestion to a token.
client = client_fixture({"specfill": {"completion": {"minConfidence": 0, "debounceMs": 0, "budgetMs": 30000}}}, CAPS)
# plain decoding: prompt lookup would finish the repeated line too fast to cancel; the
# whole prompt read first: near the prompt budget, a short answer's background read would add
# decode steps after a cancel (what is counted here is the generation stopping)
long_client = client_fixture({"specfill": {"completion": {"minConfidence": 0, "maxTokens": 400, "budgetMs": 60000,
                                                          "promptBudgetMs": 0},
                                           "speculation": {"method": "off"}}}, CAPS)
bad_client = client_fixture({"specfill": {"completion": {"maxTokens": "many"}, "nope": 1,
                                          "trace": {"server": "verbose"}}})


@pytest.mark.asyncio
async def test_invalid_settings_are_named_and_defaults_used(bad_client: LanguageClient):
    if not bad_client.messages:  # sent while initializing, maybe before the client listened
        await bad_client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
    text = "\n".join(m.message for m in bad_client.messages)
    assert "completion.maxTokens" in text and "nope: unknown setting" in text
    assert "trace" not in text  # the client's own setting
    await wait_ready(bad_client)
    open_doc(bad_client)
    assert (await complete(bad_client, *end_of(TEXT))).items  # still serving, on defaults
    # The same mistakes sent again (every change of any setting resends them) are told once.
    told = len(bad_client.messages)
    bad_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"specfill": {"completion": {"maxTokens": "many"}, "nope": 1, "other": 2}}))
    await bad_client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
    new = [m.message for m in bad_client.messages[told:]]
    assert len(new) == 1 and "other: unknown setting" in new[0], new


@pytest.mark.asyncio
async def test_changed_settings_reach_the_server_pushed_and_pulled(client: LanguageClient):
    await wait_ready(client)
    open_doc(client, WORDS)
    long = (await complete(client, *end_of(WORDS))).items[0].insert_text
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"specfill": {"completion": {"minConfidence": 0, "maxTokens": 3, "debounceMs": 0,
                                              "budgetMs": 30000}}}))
    await asyncio.sleep(0.3)
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(URI)))
    open_doc(client, WORDS)  # closing dropped the cached suggestion: this asks the model again
    short = (await complete(client, *end_of(WORDS))).items[0].insert_text
    assert len(short) < len(long)
    # pulled with workspace/configuration when the notification carries no settings
    client.set_configuration({"completion": {"minConfidence": 0, "maxTokens": 1, "debounceMs": 0, "budgetMs": 30000}},
                             section="specfill")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await asyncio.sleep(0.5)
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(URI)))
    open_doc(client, WORDS)
    tiny = (await complete(client, *end_of(WORDS))).items
    assert not tiny or len(tiny[0].insert_text) < len(short)


@pytest.mark.asyncio
async def test_model_reload_shows_progress_and_answers_empty_meanwhile(client: LanguageClient):
    await wait_ready(client)
    open_doc(client)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"specfill": {"model": {"path": "gemma3-270m"}, "completion": {"minConfidence": 0, "debounceMs": 0}}}))
    await asyncio.sleep(0.05)
    assert field(await stats(client), "state") == "loading"
    assert not (await complete(client, *end_of(TEXT))).items
    s = await wait_ready(client)
    assert "gemma" in field(s, "model")
    assert (await complete(client, *end_of(TEXT))).items
    reports = list(client.progress_reports.values())[-1]  # the first token was the start-up load
    assert reports[0].kind == "begin" and reports[-1].kind == "end" and "ready" in reports[-1].message


@pytest.mark.asyncio
async def test_typing_through_a_suggestion_is_served_from_the_cache(client: LanguageClient):
    await wait_ready(client)
    open_doc(client)
    line, col = end_of(TEXT)
    first = (await complete(client, line, col)).items[0].insert_text
    assert len(first) >= 2
    await asyncio.sleep(1.5)  # let the background continuation finish
    before = field(await stats(client), "decode_steps")
    insert(client, URI, 2, line, col, first[0])
    result = await complete(client, line, col + 1, invoked=False)
    assert result.items[0].insert_text == first[1:]
    s = await stats(client)
    assert field(s, "cache_hits") >= 1
    assert field(s, "decode_steps") == before  # no model call


@pytest.mark.asyncio
async def test_a_keystroke_after_a_cancelled_request_still_gets_a_suggestion(client: LanguageClient):
    """VS Code cancels the previous request on every keystroke; the next one must not join
    the generation that cancel is stopping (it would answer with nothing). The list goes on
    for many tokens on its line, so each request is still generating when it is cancelled."""
    await wait_ready(client)
    open_doc(client, WORDS)
    line, col = end_of(WORDS)
    for i, typed in enumerate("'ep"):
        old = asyncio.ensure_future(client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(line, col + i, invoked=False), msg_id=f"k{i}"))
        await asyncio.sleep(0.05)
        client.protocol.notify("$/cancelRequest", types.CancelParams(id=f"k{i}"))
        insert(client, URI, 2 + i, line, col + i, typed)
        try:  # cancelled in flight; or answered before its cancel arrived (the typed-through cache is fast)
            answer = await old
            assert answer.items and answer.items[0].insert_text.strip(), "answered, but with nothing"
        except Exception as exc:
            assert "cancel" in str(exc).lower(), exc
    result = await complete(client, line, col + 3, invoked=False)
    assert result.items and result.items[0].insert_text.strip()


async def settled_steps(client, quiet_s: float = 0.5, timeout_s: float = 10.0) -> int:
    """decode_steps once it has not moved for `quiet_s`: the model thread is idle (a chunk of
    the prompt takes far less; decoding on would move it every few ms)."""
    steps = field(await stats(client), "decode_steps")
    for _ in range(int(timeout_s / quiet_s)):
        await asyncio.sleep(quiet_s)
        now = field(await stats(client), "decode_steps")
        if now == steps:
            return steps
        steps = now
    raise AssertionError(f"still decoding {timeout_s} s after the cancel")


@pytest.mark.asyncio
async def test_cancel_request_stops_the_generation(long_client: LanguageClient):
    await wait_ready(long_client)
    open_doc(long_client, REPEATED)
    future = asyncio.ensure_future(long_client.protocol.send_request_async(  # a coroutine: start it now
        types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(*end_of(REPEATED)), msg_id="to-cancel"))
    await asyncio.sleep(0.8)
    long_client.protocol.notify("$/cancelRequest", types.CancelParams(id="to-cancel"))
    with pytest.raises(Exception, match="cancel"):
        await future
    steps = await settled_steps(long_client)  # the decode in flight when the cancel came may still end
    await asyncio.sleep(0.8)
    s = await stats(long_client)
    assert field(s, "decode_steps") == steps  # stopped, not decoding 400 tokens in the background
    assert field(s, "cancelled") == 1 and field(s, "superseded") == 1


@pytest.mark.asyncio
async def test_a_newer_request_supersedes_the_one_in_flight(long_client: LanguageClient):
    await wait_ready(long_client)
    open_doc(long_client, REPEATED)
    other = "file:///tmp/specfill-test/other.py"
    open_doc(long_client, TEXT, uri=other)
    first = asyncio.ensure_future(complete(long_client, *end_of(REPEATED)))
    await asyncio.sleep(0.5)
    second = asyncio.ensure_future(complete(long_client, *end_of(TEXT), uri=other))
    await asyncio.wait_for(first, timeout=10)  # answers with what it had, long before 400 tokens
    assert (await second).items
    assert field(await stats(long_client), "superseded") >= 1


async def fallback_completion(client, line, col):
    return await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(line=line, character=col)))


@pytest.mark.asyncio
async def test_completion_fallback_returns_one_item_with_a_text_edit(client: LanguageClient):
    await wait_ready(client)
    open_doc(client)
    line, col = end_of(TEXT)
    (item,) = (await fallback_completion(client, line, col)).items
    assert item.text_edit.new_text.strip() and item.text_edit.range.start == types.Position(line=line, character=col)
    assert item.command.command == "specfill.didAccept"


inline_client = client_fixture({}, types.ClientCapabilities(text_document=types.TextDocumentClientCapabilities(
    inline_completion=types.InlineCompletionClientCapabilities())))


@pytest.mark.asyncio
async def test_no_completion_fallback_for_clients_with_inline_completion(inline_client: LanguageClient):
    await wait_ready(inline_client)
    open_doc(inline_client)
    line, col = end_of(TEXT)
    result = await fallback_completion(inline_client, line, col)
    assert not result.items  # VS Code would show it twice: as ghost text and in the list
    assert (await complete(inline_client, line, col)).items


@pytest.mark.asyncio
async def test_stats_after_a_scripted_session(client: LanguageClient):
    await wait_ready(client)
    open_doc(client)
    line, col = end_of(TEXT)
    item = (await complete(client, line, col)).items[0]
    client.protocol.notify("specfill/didShow", {"uri": URI})
    client.protocol.notify("specfill/didAccept", {"uri": URI, "acceptedLength": 5})
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=item.command.command, arguments=item.command.arguments))
    await asyncio.sleep(2.0)  # the rest of the suggestion is generated in the background
    s = await stats(client)
    assert field(s, "requests") == 1 and field(s, "shown") == 1 and field(s, "accepted") == 2
    assert field(s, "accept_rate") == 2.0
    assert field(s, "cpu_ms_per_accepted_char") > 0
    assert field(field(s, "ttft_ms"), "p50") > 0 and field(field(s, "latency_ms"), "p99") > 0
    assert field(field(s, "build"), "build") == "llamafile-off"
    assert field(s, "family") == "smollm"


@pytest.mark.asyncio
async def test_edits_in_other_documents_become_context_chunks(client: LanguageClient):
    await wait_ready(client)
    other = "file:///tmp/specfill-test/helpers.py"
    helpers = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n" for i in range(60))
    open_doc(client, helpers, uri=other)
    insert(client, other, 2, 150, 0, "# edited here\n")  # far from the top: a second chunk
    await asyncio.sleep(0.1)
    assert field(await stats(client), "context_chunks") == 2
    open_doc(client)
    line, col = end_of(TEXT)
    # Prompt lookup copies from those chunks, and the prompt shows them (context.otherFilesChars).
    assert (await complete(client, line, col)).items


# The whole prompt read before the first token: a model still reading when the word is asked for.
reading_client = client_fixture({"specfill": {"completion": {"debounceMs": 0, "budgetMs": 60000,
                                                             "promptBudgetMs": 60000}}}, CAPS)
FROB = "def total(items):\n    total = 0\n" + "    total += frobnicate_widget(item, 3)\n" * 60 + "    total += frobn"


@pytest.mark.asyncio
async def test_a_word_the_file_settles_answers_while_the_model_reads(reading_client: LanguageClient):
    """~700 prompt tokens to read before the model's first token: the word the file's words
    say is being typed answers first, and the model's suggestion follows."""
    await wait_ready(reading_client)
    open_doc(reading_client, FROB)
    line, col = end_of(FROB)
    result = await complete(reading_client, line, col, invoked=False)
    assert result.items[0].insert_text == "icate_widget"
    assert field(await stats(reading_client), "word_answers") == 1
