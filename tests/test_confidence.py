"""Confidence: each emitted token keeps the target's probability of it; a suggestion is cut
before the first token below completion.minConfidence, and none is shown when that is its
first, except for the part of that token the model is sure of (the tokens starting with it
together reach the threshold); the stats count both; and what follows a shown suggestion is
generated into the cache."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from decode_helpers import decode
from lsp_helpers import (
    REPEATED,
    TEXT,
    URI,
    client_fixture,
    complete,
    end_of,
    field,
    insert,
    open_doc,
    stats,
    wait_ready,
)
from pytest_lsp import LanguageClient

from speculative.decode import Picker
from speculative.heal import Heal, PieceIndex
from speculative.output import Output

PROMPT = "import math\n\n\ndef area_of_circle(radius):\n    return math.pi * radius ** 2\n\n\ndef circumference("


def test_probabilities_are_the_targets_softmax(engine):
    ids = engine.tokenize(PROMPT)
    r = decode(engine, ids, max_tokens=6, trace=True)
    engine.reset()
    logits, _ = engine.prefill(ids)
    p = np.exp(logits - logits.max())
    assert r.probs[0] == pytest.approx(float(p[r.tokens[0]] / p.sum()), rel=1e-5)
    assert all(0 < q <= 1 for q in r.probs) and len(r.probs) == len(r.tokens)


def test_a_suggestion_is_cut_before_its_first_doubted_token(engine):
    ids = engine.tokenize(PROMPT)
    full = decode(engine, ids, max_tokens=16, trace=True)
    j = 1 + int(np.argmin(full.probs[1:]))  # the most doubted token after the first
    assert all(q > full.probs[j] for q in full.probs[:j])
    cut = decode(engine, ids, max_tokens=16, min_confidence=full.probs[j] + 1e-6)
    assert cut.stop_reason == "confidence" and cut.tokens == full.tokens[:j]
    assert cut.text == engine.detokenize(full.tokens[:j])


def test_no_suggestion_when_its_first_token_is_doubted(engine):
    ids = engine.tokenize(PROMPT)
    full = decode(engine, ids, max_tokens=4, trace=True)
    hidden = decode(engine, ids, max_tokens=4, min_confidence=full.probs[0] + 1e-6)
    assert hidden.stop_reason == "confidence" and hidden.tokens == [] and hidden.text == ""


# A toy vocabulary where the likeliest token is doubted but its first two bytes are not.
PIECES = [b"x", b" '", b" '/'", b" '/", b" '*", b" ", b"\xc3\xa9t\xc3\xa9"]
PROBS = [0.25, 0.22, 0.30, 0.08, 0.05, 0.02, 0.08]


def _pick(pieces, probs, min_confidence, heal=b""):
    index = PieceIndex(pieces)
    picker = Picker(0.0, 0, Heal(index, pieces, heal) if heal else None, False, index=index,
                    token_bytes=pieces.__getitem__, min_confidence=min_confidence)
    tok, prob, sure = picker.pick(np.log(np.array(probs)))
    out = Output(pieces.__getitem__, [], 16, skip=len(heal), min_confidence=min_confidence)
    alive = out.emit(tok, False, prob, sure)
    return pieces[tok], prob, sure, alive, out


def test_a_doubted_token_gives_the_part_of_it_the_model_is_sure_of():
    # ` '/'` (0.30) is doubted, but ` '`, ` '/'`, ` '/`, ` '*` together are 0.65.
    piece, prob, sure, alive, out = _pick(PIECES, PROBS, 0.4)
    assert piece == b" '/'" and prob == pytest.approx(0.30) and sure == 2
    assert not alive and out.reason == "confidence" and out.text == " '" and out.tokens == []
    # ` '/` alone (0.38) stays below 0.39; ` '` passes it. Above 0.65 nothing is sure.
    assert _pick(PIECES, PROBS, 0.39)[2] == 2
    assert _pick(PIECES, PROBS, 0.3)[2] == -1  # the token itself is confident enough
    *_, out = _pick(PIECES, PROBS, 0.7)
    assert out.text == "" and out.reason == "confidence"


def test_the_sure_part_is_measured_under_healing_and_never_ends_inside_a_character():
    # Healing ` ` (typed): only tokens starting with it (or a prefix of it) are allowed, and
    # renormalized; the sure part must reach past it, and the suggestion is what follows it.
    piece, prob, sure, _, out = _pick(PIECES, PROBS, 0.5, heal=b" ")
    assert piece == b" '/'" and prob == pytest.approx(0.30 / 0.67) and sure == 3  # ` '/` = 0.38/0.67
    assert out.text == "'/"
    # `été` is doubted and no prefix of it is sure: nothing; a sure part cut inside `é` is
    # dropped to whole characters.
    pieces, probs = [b"\xc3\xa9t\xc3\xa9", b"\xc3\xa9ta", b"\xc3\xa9te", b"z"], [0.35, 0.3, 0.05, 0.3]
    piece, _, sure, _, out = _pick(pieces, probs, 0.6)
    assert piece == "été".encode() and sure == 3 and out.text == "ét"
    *_, out = _pick(pieces, probs, 0.6, heal="é".encode())
    assert out.text == "t"  # ét- = 0.7 of what the healing allows


TABLE = "".join(f"    {kind:<10} {text:<13} (1, {a}) (1, {b})\n" for kind, text, a, b in [
    ("NUMBER", "'1'", 4, 5), ("OP", "'//'", 5, 7), ("NUMBER", "'1'", 7, 8), ("OP", "'*'", 8, 9),
    ("NUMBER", "'1'", 9, 10), ("OP", "'/'", 10, 11), ("NUMBER", "'5'", 11, 12)]) + "    OP"


def test_a_real_model_shows_what_it_is_sure_of_and_it_is_the_start_of_its_greedy_text(engine):
    """Token by token the model doubts what follows `OP` and its spaces (` '/'`, ` '` and others
    share the quote), but the text it is sure of is shown: a prefix of what plain greedy
    decoding writes."""
    index = PieceIndex(engine.pieces())
    ids = engine.tokenize(TABLE, parse_special=False)
    greedy = decode(engine, ids, max_tokens=8)
    before = decode(engine, ids, max_tokens=8, min_confidence=0.4)
    after = decode(engine, ids, max_tokens=8, min_confidence=0.4, index=index)
    assert after.stop_reason == before.stop_reason == "confidence" and after.tokens == before.tokens
    assert len(after.text) > len(before.text) and greedy.text.startswith(after.text)
    # The part shown of the doubted token: every token starting with it together reaches 0.4.
    doubted = greedy.tokens[len(before.tokens)]
    part = after.text[len(before.text):].encode()
    assert engine.token_bytes(doubted).startswith(part) and part != engine.token_bytes(doubted)
    engine.reset()
    logits, _ = engine.prefill(ids + before.tokens)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    assert p[doubted] < 0.4 <= p[index.starting(part)].sum()


# The whole prompt read at once, whatever the machine's speed: what the model is sure of after
# the nearest lines alone (a short answer under load) is another question.
sure = client_fixture({"specfill": {"completion": {"debounceMs": 0, "afterAccept": False, "promptBudgetMs": 0,
                                                   "budgetMs": 30000}}})


@pytest.mark.asyncio
async def test_the_server_shows_the_text_the_model_is_sure_of_at_the_default_threshold(sure: LanguageClient):
    """Spaces alone would be no suggestion: the quote after them, sure as text, makes one."""
    await wait_ready(sure)
    open_doc(sure, TABLE)
    items = (await complete(sure, *end_of(TABLE), invoked=False)).items
    assert items and items[0].insert_text.strip().startswith("'")


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
    assert field(s, "hidden") + field(s, "cut") + field(s, "words") >= 3  # "si", "sid": the file says "side"


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


# The whole prompt read at once: a short answer (one line, then a background read) is never
# continued after, and which answer a request gets depends on the machine's speed.
long_ahead = client_fixture({"specfill": {"completion": {"debounceMs": 0, "minConfidence": 0, "budgetMs": 60000,
                                                         "maxTokens": 300, "multiline": "always",
                                                         "promptBudgetMs": 0},
                                          "speculation": {"method": "off"}}})


@pytest.mark.asyncio
async def test_a_request_stops_the_generation_after_an_accept(long_ahead: LanguageClient):
    """The line goes on for hundreds of tokens: the continuation is still running when the next
    request arrives, and stops at its next step."""
    await wait_ready(long_ahead)
    open_doc(long_ahead, REPEATED)
    assert (await complete(long_ahead, *end_of(REPEATED), invoked=False)).items
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
