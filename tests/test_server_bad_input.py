"""Hostile documents never kill the server: each gets an answer, and serving goes on."""

import pytest
from lsp_helpers import TEXT, client_fixture, complete, end_of, insert, open_doc, wait_ready
from pytest_lsp import LanguageClient

client = client_fixture({"specfill": {"completion": {"minConfidence": 0, "debounceMs": 0, "maxTokens": 8}}})
BIG = "file:///tmp/specfill-test/big.py"
CRLF = "file:///tmp/specfill-test/crlf.py"
EMOJI = "file:///tmp/specfill-test/emoji.py"


@pytest.mark.asyncio
async def test_a_5_mb_file_is_completed_from_its_end(client: LanguageClient):
    await wait_ready(client)
    big = "x = 1\n" * (5 * 1024 * 1024 // 6) + "def area_of_square(side):\n    return "
    open_doc(client, big, uri=BIG)
    result = await complete(client, *end_of(big), uri=BIG)
    assert result.items and result.items[0].insert_text.strip()
    open_doc(client)
    assert (await complete(client, *end_of(TEXT))).items  # other documents still served


@pytest.mark.asyncio
async def test_crlf_and_utf16_positions(client: LanguageClient):
    await wait_ready(client)
    crlf = TEXT.replace("\n", "\r\n")
    open_doc(client, crlf, uri=CRLF)
    result = await complete(client, *end_of(TEXT), uri=CRLF)
    assert result.items and "\r" not in result.items[0].insert_text.split("\n")[0]
    # an emoji is two UTF-16 code units: the cursor after "😀😀 = " is at character 7
    text = "s = '😀😀'\nn = len(s)\n😀😀 = "
    open_doc(client, text, uri=EMOJI)
    assert (await complete(client, 2, 7, uri=EMOJI)).items is not None
    assert not (await complete(client, 2, 8, uri=EMOJI)).items  # past the end of the line
    insert(client, EMOJI, 2, 2, 7, "'\U0001d11e'")  # a surrogate pair typed mid-document
    result = await complete(client, 2, 7 + 4, uri=EMOJI)
    assert result.items is not None
    assert (await complete(client, *end_of(TEXT), uri=CRLF)).items  # still serving
