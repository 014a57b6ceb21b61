"""The file's words decide where the model doubts mid-word: the rest of the one word around the
cursor that starts with what is typed and stands out (lsp_server/words.py), shown over LSP
when the model's suggestion stops at a doubted token inside it."""

from __future__ import annotations

import pytest
from lsp_helpers import client_fixture, complete, end_of, field, open_doc, stats, wait_ready
from pytest_lsp import LanguageClient

from lsp_server.words import complete_word, expected_word

USES = "def handle(request_payload_zqx):\n    log(request_payload_zqx)\n    return request_payload_zqx\n\n\n"


def test_the_word_that_stands_out_completes_what_is_typed():
    assert expected_word(USES + "x = req", "\n") == "uest_payload_zqx"
    assert expected_word("x = req", "\nprint(request_payload_zqx, request_payload_zqx)\n") == "uest_payload_zqx"
    assert expected_word("fünf = fünfzig + fünfzig\nfü", "") == "nfzig"  # words are Unicode identifiers


def test_no_word_when_none_stands_out_or_the_cursor_is_not_at_a_words_end():
    twice = "a = request_id + request_id\nb = request_ids + request_ids\n"
    assert expected_word(twice + "c = req", "\n") == ""  # two words as common: a guess
    assert expected_word("a = request_id + request_id + request_ids\nc = req", "\n") == "uest_id"  # twice as common
    assert expected_word(USES + "x = r", "\n") == ""  # one character says too little
    assert expected_word(USES + "x = req", "uest\n") == ""  # inside a word: editing it
    assert expected_word(USES + "x = 12", "\n") == ""  # a number is no word
    assert expected_word("a = feedback + feedback\nb = 0xfe", "\n") == ""  # nor is its tail
    assert expected_word("a = requests + request + request + request\nb = request", "\n") == ""  # the typed word


def test_a_cut_suggestion_is_completed_only_when_it_is_the_start_of_the_word():
    assert complete_word("", USES + "x = req", "\n") == "uest_payload_zqx"
    assert complete_word("uest_", USES + "x = req", "\n") == "uest_payload_zqx"
    assert complete_word("uire", USES + "x = req", "\n") == ""  # the model is sure of another word
    assert complete_word("uest_payload_zqx", USES + "x = req", "\n") == ""  # nothing to add


# An explicit request with one candidate: the model's answer, which no word answers first.
doubting = client_fixture({"specfill": {"completion": {"debounceMs": 0, "minConfidence": 0.999999,
                                                       "afterAccept": False, "candidates": 1}}})


@pytest.mark.asyncio
async def test_the_server_completes_a_doubted_word_from_the_files_words(doubting: LanguageClient):
    """At a threshold no token reaches, the model alone shows nothing mid-word; the word the
    file uses three times is shown instead, and the stats count it."""
    await wait_ready(doubting)
    text = USES + "print(req"
    open_doc(doubting, text + ")\n")
    items = (await complete(doubting, *end_of(text), invoked=True)).items
    assert items and items[0].insert_text == "uest_payload_zqx"
    assert field(await stats(doubting), "words") == 1
