"""Confidence: each emitted token keeps the target's probability of it; a suggestion is cut
before the first token below completion.minConfidence, and none is shown when that is its
first; the stats count both; and what follows a shown suggestion is generated into the cache."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from lsp_helpers import TEXT, URI, client_fixture, complete, end_of, field, insert, open_doc, stats, wait_ready
from pytest_lsp import LanguageClient

PROMPT = "import math\n\n\ndef area_of_circle(radius):\n    return math.pi * radius ** 2\n\n\ndef circumference("


def test_probabilities_are_the_targets_softmax(engine):
    ids = engine.tokenize(PROMPT)
    r = engine.generate(ids, max_tokens=6, trace=True)
    engine.reset()
    logits, _ = engine.prefill(ids)
    p = np.exp(logits - logits.max())
    assert r.probs[0] == pytest.approx(float(p[r.tokens[0]] / p.sum()), rel=1e-5)
    assert all(0 < q <= 1 for q in r.probs) and len(r.probs) == len(r.tokens)


def test_a_suggestion_is_cut_before_its_first_doubted_token(engine):
    ids = engine.tokenize(PROMPT)
    full = engine.generate(ids, max_tokens=16, trace=True)
    j = 1 + int(np.argmin(full.probs[1:]))  # the most doubted token after the first
    assert all(q > full.probs[j] for q in full.probs[:j])
    cut = engine.generate(ids, max_tokens=16, min_confidence=full.probs[j] + 1e-6)
    assert cut.stop_reason == "confidence" and cut.tokens == full.tokens[:j]
    assert cut.text == engine.detokenize(full.tokens[:j])


def test_no_suggestion_when_its_first_token_is_doubted(engine):
    ids = engine.tokenize(PROMPT)
    full = engine.generate(ids, max_tokens=4, trace=True)
    hidden = engine.generate(ids, max_tokens=4, min_confidence=full.probs[0] + 1e-6)
    assert hidden.stop_reason == "confidence" and hidden.tokens == [] and hidden.text == ""


doubting = client_fixture({"specfill": {"completion": {"debounceMs": 0, "minConfidence": 0.999999,
                                                       "afterAccept": False}}})
ahead = client_fixture({"specfill": {"completion": {"debounceMs": 0, "minConfidence": 0, "budgetMs": 30000}}})


@pytest.mark.asyncio
async def test_the_stats_count_hidden_and_cut_suggestions(doubting: LanguageClient):
    await wait_ready(doubting)
    open_doc(doubting)
    line, col = end_of(TEXT)
    for i, ch in enumerate("side"):
        await complete(doubting, line, col + i, invoked=False)
        insert(doubting, URI, 2 + i, line, col + i, ch)
    s = await stats(doubting)
    assert field(s, "hidden") + field(s, "cut") >= 3


@pytest.mark.asyncio
async def test_what_follows_a_shown_suggestion_is_generated_into_the_cache_and_a_request_stops_it(
        ahead: LanguageClient):
    await wait_ready(ahead)
    text = "def area_of_square(side):\n    return side ** 2\n\n\ndef area_of_rectangle(width, height):\n"
    open_doc(ahead, text)
    line, col = end_of(text)
    shown = (await complete(ahead, line, col, invoked=False)).items[0].insert_text
    for _ in range(100):  # the continuation runs once the model is idle
        if field(await stats(ahead), "after_accept"):
            break
        await asyncio.sleep(0.1)
    assert field(await stats(ahead), "after_accept") == 1
    # Accept: the text typed in, and the next suggestion comes from the cache, without the model.
    insert(ahead, URI, 2, line, col, shown)
    lines = (text + shown).split("\n")
    steps = field(await stats(ahead), "decode_steps")
    following = (await complete(ahead, len(lines) - 1, len(lines[-1]), invoked=False)).items
    assert following and following[0].insert_text.strip()
    assert field(await stats(ahead), "decode_steps") == steps


long_ahead = client_fixture({"specfill": {"completion": {"debounceMs": 0, "minConfidence": 0, "budgetMs": 60000,
                                                         "maxTokens": 300, "multiline": "always"},
                                          "speculation": {"method": "off"}}})
ONES = "x = [\n" + "    1,\n" * 30


@pytest.mark.asyncio
async def test_a_request_stops_the_generation_after_an_accept(long_ahead: LanguageClient):
    """The list goes on for hundreds of tokens: the continuation is still running when the next
    request arrives, and stops at its next step."""
    await wait_ready(long_ahead)
    open_doc(long_ahead, ONES)
    assert (await complete(long_ahead, *end_of(ONES), invoked=False)).items
    for _ in range(200):  # the first generation ends (300 tokens), then the one after it starts
        s = await stats(long_ahead)
        if field(s, "decode_steps") > 310:
            break
        await asyncio.sleep(0.05)
    superseded = field(s, "superseded")
    other = "file:///tmp/specfill-test/other.py"
    open_doc(long_ahead, "def f(x):\n    return ", uri=other)
    assert (await complete(long_ahead, 1, 11, uri=other, invoked=False)).items
    s = await stats(long_ahead)
    assert field(s, "superseded") == superseded + 1 and field(s, "after_accept") == 0
