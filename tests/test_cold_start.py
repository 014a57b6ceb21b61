"""Landing somewhere new, through the worker: the prompt-time budget (a short prompt at once,
the full one read in the background), read-ahead stopped by a real request, places kept warm."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import threading
import time
from pathlib import Path

import pytest

from lsp_server.backends.backend import Request
from lsp_server.backends.prompt_plan import MIN_SHORT_TOKENS, READ_CHUNK
from lsp_server.backends.worker import TYPING_S, ModelWorker
from lsp_server.session import pipeline
from lsp_server.session.pipeline import Pipeline, Place
from lsp_server.settings import Settings
from speculative.cost_model import ReadRate
from speculative.engine import FULL

SOURCE = Path(argparse.__file__).read_text()


def settings(budget_ms: int) -> Settings:
    s = Settings()
    s.completion.prompt_budget_ms = budget_ms
    s.completion.min_confidence = 0.0
    s.completion.after_accept = False
    return s


@pytest.fixture(scope="module")
def worker():
    w = ModelWorker()
    w.load(settings(0)).result()
    yield w
    w.shutdown()


class FixedRate(ReadRate):
    """A read rate real reads do not move: the case is about this rate, not the machine's."""

    def observe(self, n: int, depth: int, ms: float) -> None:
        pass


@contextlib.contextmanager
def read_rate(w: ModelWorker, ms_per_token: float):
    saved, w.local.costs.read = w.local.costs.read, FixedRate(ms_per_token, 0.0)
    try:
        yield
    finally:
        w.local.costs.read = saved


def place(n: int) -> tuple[str, str]:
    """(prefix, suffix) at the start of the n-th `def` of argparse.py: a long file above it."""
    at = [i for i in range(len(SOURCE)) if SOURCE.startswith("\n    def ", i)][n] + 1
    return SOURCE[:at] + "    def ", SOURCE[at + 8:]


def wait_read(w: ModelWorker, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while w.reading:
        assert time.monotonic() < deadline, "the background read never finished"
        time.sleep(0.05)


def test_a_long_prompt_is_answered_from_a_short_one_and_read_in_the_background(worker):
    prefix, suffix = place(40)
    s = settings(150)
    w = worker
    w.local.engine.reset()
    budget_tokens = max(MIN_SHORT_TOKENS, w.local.costs.read.tokens_within(150))
    first = w.complete(prefix, suffix, "argparse.py", s).result()
    assert first.short and first.tokens
    assert first.n_prompt - first.n_reused <= 1.5 * budget_tokens  # what was read fits the budget
    wait_read(w)
    full = w.local.planner.full(w_req(w, prefix, suffix, s)).tokens
    assert len(full) > 3 * first.n_prompt
    assert w.local.engine.held(FULL) == full[:-1]  # the whole full prompt, but its last token
    again = w.complete(prefix, suffix, "argparse.py", s).result()
    assert not again.short and again.n_reused == again.n_prompt - 1  # one token read, for its logits


def w_req(w: ModelWorker, prefix: str, suffix: str, s: Settings):
    return Request(prefix, suffix, "argparse.py", s, threading.Event())


def test_a_slow_measured_rate_still_answers_from_a_short_prompt(worker):
    """On a machine busy with other work the measured rate is slow and the budget buys only a
    few tokens: the short prompt keeps its least size, rather than the full prompt being read
    (which held requests for seconds)."""
    w = worker
    w.local.engine.reset()
    w.local.places.clear()
    with read_rate(w, 20.0):  # 150 ms read 7 tokens at this rate
        r = w.complete(*place(40), "slow.py", settings(150)).result()
    assert r.short and r.n_prompt <= 2 * MIN_SHORT_TOKENS
    wait_read(w)


def test_typing_on_stays_on_the_short_prompt_while_more_than_a_chunk_is_unread(worker):
    """Where a short prompt answers, a keystroke reads the rest of the full prompt only when
    that is at most a chunk, even if the rest would fit the budget: read in the foreground it
    made the keystroke miss (300 ms against 7 for the short answer)."""
    w, s = worker, settings(150)
    prefix, suffix = place(40)
    w.local.engine.reset()
    w.local.places.clear()
    assert w.complete(prefix, suffix, "argparse.py", s).result().short
    wait_read(w)
    full = w.local.planner.full(w_req(w, prefix + "f", suffix, s)).tokens
    unread = 100  # within the budget at the rate set below, and over a chunk
    w.local.engine.truncate(len(full) - unread, FULL)
    with read_rate(w, 1.0):
        on = w.complete(prefix + "f", suffix, "argparse.py", s).result()
        assert on.short and on.n_prompt - on.n_reused <= 2  # a keystroke on the short sequence
        wait_read(w)  # the rest, in the background
        done = w.complete(prefix + "f", suffix, "argparse.py", s).result()
        assert not done.short and done.n_reused == done.n_prompt - 1
        w.local.engine.truncate(len(full) - unread, FULL)
        w.local.planner.forget()  # landing here afresh: within the budget, the full prompt is read at once
        landed = w.complete(prefix + "f", suffix, "argparse.py", s).result()
        assert not landed.short and landed.n_prompt - landed.n_reused >= unread


def test_two_places_answered_in_turn_each_keep_their_short_prompt(worker):
    """Two windows typing at once (the shared server): a keystroke at A after one at B reads a
    token or two on A's short prompt, not all of it again."""
    w, s = worker, settings(150)
    (pa, sa), (pb, sb) = place(40), place(60)
    w.local.engine.reset()
    w.local.places.clear()
    w.local.planner.forget()
    with read_rate(w, 5.0):  # 150 ms reads 30 tokens: both answer from short prompts
        first = w.complete(pa, sa, "a.py", s).result()
        other = w.complete(pb, sb, "b.py", s).result()
        on = w.complete(pa + "f", sa, "a.py", s).result()
    assert first.short and other.short and on.short
    assert other.n_prompt - other.n_reused > first.n_prompt // 2  # B's short prompt was read anew
    assert on.n_prompt - on.n_reused <= 2
    wait_read(w)


def test_a_session_counts_as_typing_until_its_last_keystroke_is_older_than_typing_s():
    w = ModelWorker()
    try:
        w.typed("a")
        assert not w.others_typing("a")  # a session's own keystrokes never count
        assert w.others_typing("b")
        w.typed("b")
        assert w.others_typing("a") and w.others_typing("b")
        time.sleep(TYPING_S)
        w.typed("b")
        assert not w.others_typing("b")  # "a" stopped typing
        assert w.others_typing("a")
    finally:
        w.shutdown()


def test_the_rest_of_an_answered_suggestion_gives_way_at_once_to_a_request_already_waiting():
    """Two windows: when one window's suggestion is answered and its rest would go on in the
    background, the other window's request already queued behind it must not wait for the rest."""
    w, gate = ModelWorker(), threading.Event()
    try:
        w._pool.submit(gate.wait)  # the model thread busy with window a's generation
        queued = w.complete("x = ", "", "b.py", Settings(), owner="b")
        rest = threading.Event()
        w.yield_to_requests(rest)
        assert rest.is_set(), "window b's request was already waiting"
        gate.set()
        queued.result(timeout=10)
        later = threading.Event()
        w.yield_to_requests(later)
        assert not later.is_set()  # nothing waits: the rest goes on until a request comes
        w.complete("y = ", "", "b.py", Settings(), owner="b").result(timeout=10)
        assert later.is_set()
    finally:
        gate.set()
        w.shutdown()


def test_a_request_cancelled_before_it_started_no_longer_stops_the_rest_of_a_suggestion():
    """A queued request whose caller gave up before the model thread took it waits no more:
    the rest of an answered suggestion must then go on, not stop at once for it."""
    w, gate = ModelWorker(), threading.Event()
    try:
        w._pool.submit(gate.wait)
        assert w.complete("x = ", "", "b.py", Settings(), owner="b").cancel()
        rest = threading.Event()
        w.yield_to_requests(rest)
        assert not rest.is_set(), "no request waits"
        gate.set()
    finally:
        gate.set()
        w.shutdown()


def test_landing_while_another_session_types_reads_a_quarter_of_the_budget(worker):
    """The shared server: a window landing while another one types answers from a short prompt
    that a quarter of the budget reads, as the other window's next keystroke would wait for the
    read; alone (or once the other stopped typing) it reads its whole prompt at once."""
    w, s = worker, settings(300)
    prefix = SOURCE[:800]

    def land(owner: object = None):
        w.local.engine.reset()
        w.local.places.clear()
        w.local.planner.forget()
        r = w.complete(prefix, "", "a.py", s, owner=owner).result()
        wait_read(w)
        return r

    with read_rate(w, 1.0):  # the budget reads 300 tokens, a quarter of it 75
        alone = land()
        assert not alone.short and 75 < alone.n_prompt <= 300
        w.typed("other window")  # a keystroke there, answered or not by the model
        beside = land()
        assert beside.short and beside.n_prompt < alone.n_prompt
        time.sleep(TYPING_S)
        assert not land().short


async def test_a_suggestion_is_answered_with_its_first_text_when_another_request_waits(worker, monkeypatch):
    """Two windows on one model: while another window's request waits behind a suggestion, the
    suggestion is answered with its first text rather than after its line (or PARTIAL_MS), so
    the model goes to the waiting request; alone it is answered with its whole line."""
    monkeypatch.setattr(pipeline, "PARTIAL_MS", 60_000)  # the line's end alone answers, when nothing waits
    s = settings(0)
    s.completion.max_tokens, s.completion.budget_ms = 96, 60_000
    s.speculation.method = "off"  # one token a step: the first text is one token
    row = "v = [" + ", ".join(map(str, range(1, 60))) + "]\n"
    text = row * 12 + "v = [1, 2, 3, "  # the line goes on past 96 tokens

    async def suggest(uri: str, wait_behind: bool):
        p = Pipeline(worker)
        asked = asyncio.create_task(p.suggest(Place(uri, "v.py", text, ""), s, True, lambda _: None))
        await asyncio.sleep(0)  # the suggestion's generation is on the model thread's queue
        other = worker.complete("x = ", "", "other.py", s, owner="other window") if wait_behind else None
        shown = await asyncio.wait_for(asked, 60)
        if other is not None:
            other.result(timeout=60)
        return shown.text

    alone = await suggest("file:///alone/v.py", wait_behind=False)
    assert alone.startswith("4, 5, 6, 7, ")  # the whole line the 96 tokens made
    beside = await suggest("file:///beside/v.py", wait_behind=True)
    assert beside and alone.startswith(beside) and len(beside) < len(alone) // 2, (beside, alone)
    await asyncio.sleep(TYPING_S)  # these windows stop typing: the next test's requests are alone


async def test_an_answer_cut_short_of_its_line_tells_the_editor_when_the_line_is_whole(worker, monkeypatch):
    """Answered with its first text (PARTIAL_MS 0), a suggestion goes on into the cache; once
    its line is whole the pipeline says so once (the server's specfill/inlineCompletion/refresh),
    and asking again at the same place gets the longer text at once, from the cache."""
    monkeypatch.setattr(pipeline, "PARTIAL_MS", 0)
    s = settings(0)
    s.completion.max_tokens, s.completion.budget_ms = 160, 60_000
    s.speculation.method = "off"  # one token a step: the line takes many steps
    row = "v = [" + ", ".join(map(str, range(1, 40))) + "]\n"
    at = Place("file:///grew/v.py", "v.py", row * 12 + "v = [1, 2, 3, ", "")
    loop = asyncio.get_running_loop()
    grew: list[str] = []
    told = asyncio.Event()

    def tell_grew(uri: str) -> None:
        grew.append(uri)
        loop.call_soon(told.set)

    p = Pipeline(worker, grew=tell_grew)
    first = await asyncio.wait_for(p.suggest(at, s, False, lambda _: None), 60)
    assert first is not None and first.text.strip()
    await asyncio.wait_for(told.wait(), 60)
    hits = p.stats.cache_hits
    again = await asyncio.wait_for(p.suggest(at, s, False, lambda _: None), 5)
    assert again is not None and again.text.startswith(first.text) and len(again.text) > len(first.text), \
        (first.text, again.text)
    assert p.stats.cache_hits == hits + 1  # the cache answered: no new generation
    entry = p.cache.current(at.uri)
    for _ in range(600):  # its generation ends here, not in the next test's model work
        if entry.done:
            break
        await asyncio.sleep(0.1)
    assert entry.done and grew == [at.uri] and p.stats.report()["grown"] == 1  # its end says nothing more
    await asyncio.sleep(TYPING_S)  # this window stops typing: the next test's requests are alone


async def test_a_line_the_model_ended_is_not_shown_longer_at_its_place_after_the_text_that_follows_it(worker):
    """The generation after a shown suggestion (completion.afterAccept) starts from the shown
    line read again, whose last word may go another way and continue a line the model ended:
    at the suggestion's own place the cache still answers the line as the model ended it, and
    past it, what followed."""
    s = settings(0)
    s.completion.after_accept, s.completion.max_tokens, s.completion.budget_ms = True, 120, 60_000
    s.speculation.method, s.completion.multiline = "off", "never"  # the line's end stops the generation
    row = "v = [" + ", ".join(map(str, range(1, 20))) + "]\n"
    at = Place("file:///after/v.py", "v.py", row * 12 + "v = [1, 2, 3, ", "")
    p = Pipeline(worker)
    first = await asyncio.wait_for(p.suggest(at, s, False, lambda _: None), 60)
    assert first is not None
    entry = p.cache.current(at.uri)
    for _ in range(600):
        if entry.until is not None:
            break
        await asyncio.sleep(0.1)
    line = entry.text[:entry.until]
    assert line.startswith(first.text) and line.endswith("]"), line
    for _ in range(60):  # the generation after it ends (it would write over the text set next)
        seen = entry.text
        await asyncio.sleep(1.0)
        if entry.text == seen:
            break
    entry.text = line + " + [20]"  # what a read of the line again may go on with
    again = await asyncio.wait_for(p.suggest(at, s, False, lambda _: None), 5)
    assert again is not None and again.text == line
    past = await asyncio.wait_for(p.suggest(Place(at.uri, at.path, at.prefix + line, ""), s, False,
                                            lambda _: None), 5)
    assert past is not None and past.text == " + [20]"
    await asyncio.sleep(TYPING_S)  # this window stops typing: the next test's requests are alone


async def test_a_stub_a_stopped_generation_left_in_the_cache_is_generated_on_and_told(worker):
    """Typing through text a stopped generation left (a keystroke superseded it after a token or
    two), the cache answers with that stub at once; the place is generated again in the
    background, and once its line is whole the editor is told (specfill/inlineCompletion/refresh)."""
    s = settings(0)
    s.completion.max_tokens, s.completion.budget_ms, s.speculation.method = 96, 60_000, "off"
    row = "v = [" + ", ".join(map(str, range(1, 20))) + "]\n"
    at = Place("file:///stub/v.py", "v.py", row * 12 + "v = [1, 2, 3, ", "")
    grew: list[str] = []
    p = Pipeline(worker, grew=grew.append)
    stub = p.cache.put(at.uri, at.prefix, at.suffix, "4,", done=True)
    stub.cut = True  # as _finished marks a generation stopped with "cancelled"
    first = await asyncio.wait_for(p.suggest(at, s, False, lambda _: None), 5)
    assert first is not None and first.text == "4," and p.stats.cache_hits == 1
    for _ in range(600):
        if grew:
            break
        await asyncio.sleep(0.1)
    assert grew == [at.uri] and len(p.stats.new_suggestion_ms) == 1  # the whole line: a new suggestion
    again = await asyncio.wait_for(p.suggest(at, s, False, lambda _: None), 5)
    assert again is not None and len(again.text) > len(first.text), again
    entry = p.cache.current(at.uri)
    for _ in range(600):
        if entry.done:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(TYPING_S)  # this window stops typing: the next test's requests are alone


async def test_a_keystroke_that_waits_for_a_generation_under_way_counts_as_a_new_suggestion(worker, monkeypatch):
    """The status bar's figure (new_suggestion_ms) counts a request that joined a generation
    under way and waited for its line, as the editor's last keystroke often does; not the
    cache's instant answers."""
    monkeypatch.setattr(pipeline, "PARTIAL_MS", 60_000)  # the line's end alone answers
    s = settings(0)
    s.completion.max_tokens, s.completion.budget_ms, s.speculation.method = 96, 60_000, "off"
    row = "v = [" + ", ".join(map(str, range(1, 60))) + "]\n"
    at = Place("file:///join/v.py", "v.py", row * 12 + "v = [1, 2, 3, ", "")  # past 96 tokens
    p = Pipeline(worker)
    first = asyncio.create_task(p.suggest(at, s, False, lambda _: None))
    for _ in range(100):
        if at.uri in p._inflight:
            break
        await asyncio.sleep(0.01)
    joined = await asyncio.wait_for(p.suggest(at, s, False, lambda _: None), 60)
    assert joined is not None and (await first) is not None
    assert p.stats.cache_hits == 1 and len(p.stats.new_suggestion_ms) == 2
    assert await p.suggest(at, s, False, lambda _: None) is not None  # the cache, at once: not counted
    assert len(p.stats.new_suggestion_ms) == 2
    await asyncio.sleep(TYPING_S)  # this window stops typing: the next test's requests are alone


def test_a_full_answer_elsewhere_drops_the_read_pending_for_the_place_left(worker, caplog):
    """Land at A (a short answer; A's full prompt pending), then at once at B, whose prompt fits
    the budget: B is read whole, and A's read must not follow and evict it."""
    w, s = worker, settings(150)
    a, b = place(40), place(10)
    w.local.engine.reset()
    w.local.places.clear()
    caplog.set_level(logging.DEBUG, logger="specfill")
    with read_rate(w, 1.0):
        assert w.complete(*a, "argparse.py", s).result().short
        small = (b[0][-300:], "")
        r = w.complete(*small, "other.py", s).result()
    assert not r.short
    time.sleep(0.3)
    assert not w.reading and not [m for m in reads_logged(caplog) if m.endswith("done")]
    full_b = w.local.planner.full(Request(*small, "other.py", s, threading.Event())).tokens
    assert w.local.engine.held(FULL)[: len(full_b)] == full_b


def test_a_request_stops_a_read_ahead_and_the_read_goes_on_after_it(worker):
    w = worker
    s = settings(150)
    a = place(60)
    w.local.engine.reset()
    w.read_ahead(*a, "argparse.py", s)
    time.sleep(0.1)
    before = w.local.read_ahead_tokens
    t0 = time.perf_counter()
    r = w.complete(*a, "argparse.py", s).result()  # typing where the cursor rests, before the read is done
    assert r.short and r.tokens and time.perf_counter() - t0 < 5
    wait_read(w)
    assert w.local.read_ahead_tokens > before + READ_CHUNK
    full = w.local.planner.full(w_req(w, *a, s)).tokens
    assert w.local.engine.held(FULL) == full[:-1]


def focus_elsewhere_while_reading(w: ModelWorker, a, b, s: Settings, caplog) -> int:
    """didFocus at A, then at B once A's read is two chunks in; what the window held then."""
    w.local.engine.reset()
    w.local.places.clear()
    caplog.set_level(logging.DEBUG, logger="specfill")
    w.read_ahead(*a, "argparse.py", s)
    while len(w.local.engine.held(FULL)) < 2 * READ_CHUNK:
        time.sleep(0.001)
    w.read_ahead(*b, "argparse.py", s)
    return len(w.local.engine.held(FULL))


def reads_logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("read ahead: ")]


def test_focus_elsewhere_stops_the_read_of_the_place_left(worker, caplog):
    """didFocus at B while A's prompt is being read: A's read ends within a chunk, then B's is
    read (a request at B would otherwise wait for all of A)."""
    w, s = worker, settings(150)
    a, b = place(60), place(10)
    at_focus = focus_elsewhere_while_reading(w, a, b, s, caplog)
    wait_read(w)
    reads = reads_logged(caplog)
    full_a = w.local.planner.full(w_req(w, *a, s)).tokens
    assert int(reads[0].split()[2]) <= at_focus + READ_CHUNK < len(full_a) - 2 * READ_CHUNK and "paused" in reads[0]
    assert w.local.engine.held(FULL) == w.local.planner.full(w_req(w, *b, s)).tokens[:-1]


def test_a_request_never_waits_for_a_background_read(worker, caplog):
    """While A's prompt is read in the background, didFocus at B and at once a request at C:
    neither A's read nor B's may run on while C waits (a 4 s wait was seen)."""
    w, s = worker, settings(150)
    a, b = place(60), place(20)
    at_focus = focus_elsewhere_while_reading(w, a, b, s, caplog)
    assert w.complete(b[0][-400:], "", "other.py", s).result().tokens
    reads = reads_logged(caplog)
    assert len(reads) == 1 and int(reads[0].split()[2]) <= at_focus + READ_CHUNK, reads  # A's, stopped
    wait_read(w)


def test_moving_between_two_documents_reuses_their_kv(worker):
    w = worker
    s = settings(0)  # always the full prompt: what is counted is the reading
    a, b = place(30), place(70)
    w.local.engine.reset()
    w.local.places.clear()
    ra = w.complete(*a, "argparse.py", s).result()
    rb = w.complete(*b, "argparse.py", s).result()
    assert ra.n_prompt - ra.n_reused > 500 and rb.n_prompt - rb.n_reused > 100
    steps = w.local.engine.decode_steps
    back = w.complete(*a, "argparse.py", s).result()
    assert back.n_reused == back.n_prompt - 1, "A's cache came back from memory, not read again"
    assert w.local.places.loads >= 1
    assert w.local.engine.decode_steps - steps == back.decode_steps + 1  # one prompt token, then the decoding
    forth = w.complete(*b, "argparse.py", s).result()
    assert forth.n_reused == forth.n_prompt - 1
