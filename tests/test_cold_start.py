"""Landing somewhere new: the prompt-time budget (a short prompt at once, the full one read in
the background), read-ahead stopped by a real request (inside its decode), places kept warm, the
weights converted once, and llama.cpp's extra buffer types taken out by name."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from lsp_server.engines import Request
from lsp_server.prompt_plan import MIN_SHORT_TOKENS, READ_CHUNK
from lsp_server.settings import Settings
from lsp_server.worker import ModelWorker
from speculative.convert import converted_path, weights_path
from speculative.cost_model import ReadRate
from speculative.engine import WINDOW, Engine
from speculative.errors import Cancelled
from speculative.windows import WarmWindows

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
    assert w.local.engine.held(WINDOW) == full[:-1]  # the whole full prompt, but its last token
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
    w.local.windows.clear()
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
    w.local.windows.clear()
    assert w.complete(prefix, suffix, "argparse.py", s).result().short
    wait_read(w)
    full = w.local.planner.full(w_req(w, prefix + "f", suffix, s)).tokens
    unread = 100  # within the budget at the rate set below, and over a chunk
    w.local.engine.truncate(len(full) - unread, WINDOW)
    with read_rate(w, 1.0):
        on = w.complete(prefix + "f", suffix, "argparse.py", s).result()
        assert on.short and on.n_prompt - on.n_reused <= 2  # a keystroke on the short sequence
        wait_read(w)  # the rest, in the background
        done = w.complete(prefix + "f", suffix, "argparse.py", s).result()
        assert not done.short and done.n_reused == done.n_prompt - 1
        w.local.engine.truncate(len(full) - unread, WINDOW)
        w.local.planner.forget()  # landing here afresh: within the budget, the full prompt is read at once
        landed = w.complete(prefix + "f", suffix, "argparse.py", s).result()
        assert not landed.short and landed.n_prompt - landed.n_reused >= unread


def test_a_full_answer_elsewhere_drops_the_read_pending_for_the_place_left(worker, caplog):
    """Land at A (a short answer; A's full prompt pending), then at once at B, whose prompt fits
    the budget: B is read whole, and A's read must not follow and evict it."""
    w, s = worker, settings(150)
    a, b = place(40), place(10)
    w.local.engine.reset()
    w.local.windows.clear()
    caplog.set_level(logging.DEBUG, logger="specfill")
    with read_rate(w, 1.0):
        assert w.complete(*a, "argparse.py", s).result().short
        small = (b[0][-300:], "")
        r = w.complete(*small, "other.py", s).result()
    assert not r.short
    time.sleep(0.3)
    assert not w.reading and not [m for m in reads_logged(caplog) if m.endswith("done")]
    full_b = w.local.planner.full(Request(*small, "other.py", s, threading.Event())).tokens
    assert w.local.engine.held(WINDOW)[: len(full_b)] == full_b


def test_a_background_read_stops_within_one_chunk_of_a_request(engine):
    tokens = engine.tokenize(SOURCE)[:1200]
    engine.reset()
    stop = threading.Event()
    reader = threading.Thread(target=lambda: pytest.raises(Cancelled, engine.read, tokens, stop, chunk=32))
    reader.start()
    while len(engine.held(WINDOW)) < 64:
        time.sleep(0.001)
    stop.set()
    at_stop = len(engine.held(WINDOW))
    reader.join()
    assert 0 <= len(engine.held(WINDOW)) - at_stop <= 32 < len(tokens) - at_stop
    assert engine.held(WINDOW) == tokens[: len(engine.held(WINDOW))]  # what was read stays read


def test_stop_reading_stops_a_read_inside_its_decode_and_what_it_keeps_is_exact(engine, model_path):
    tokens = engine.tokenize(SOURCE)[:400]
    never = threading.Event()  # the read would otherwise stop only between chunks
    engine.reset()
    engine.read(tokens[:41], never)  # 40 tokens held: the stopped read must keep them
    engine.stop_reading()  # no read runs: nothing happens, now or later
    assert engine.generate(tokens[:41], max_tokens=4).stop_reason != "cancelled"
    done = threading.Event()

    def stopper() -> None:
        while not done.is_set():
            engine.stop_reading()
            time.sleep(0.002)

    helper = threading.Thread(target=stopper)
    steps = engine.decode_steps
    helper.start()
    try:
        with pytest.raises(Cancelled):
            engine.read(tokens, never, chunk=engine.n_batch)  # one decode of 128 tokens, then more
    finally:
        done.set()
        helper.join()
    assert engine.decode_steps == steps + 1  # stopped inside its first decode
    held = engine.held(WINDOW)
    assert 41 <= len(held) < 41 + engine.n_batch and held == tokens[: len(held)]
    # What the stopped read kept is exact: reading on gives a fresh evaluation's logits.
    kept = len(held)
    logits, reused = engine.prefill(tokens)
    assert reused == kept
    fresh = Engine(model_path, n_ctx=2048)
    try:
        np.testing.assert_allclose(logits, fresh.prefill(tokens)[0], atol=1e-3, rtol=0)
    finally:
        fresh.close()


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
    assert w.local.engine.held(WINDOW) == full[:-1]


def focus_elsewhere_while_reading(w: ModelWorker, a, b, s: Settings, caplog) -> int:
    """didFocus at A, then at B once A's read is two chunks in; what the window held then."""
    w.local.engine.reset()
    w.local.windows.clear()
    caplog.set_level(logging.DEBUG, logger="specfill")
    w.read_ahead(*a, "argparse.py", s)
    while len(w.local.engine.held(WINDOW)) < 2 * READ_CHUNK:
        time.sleep(0.001)
    w.read_ahead(*b, "argparse.py", s)
    return len(w.local.engine.held(WINDOW))


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
    assert w.local.engine.held(WINDOW) == w.local.planner.full(w_req(w, *b, s)).tokens[:-1]


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


def test_saved_windows_stay_within_their_bounds_and_come_back(engine):
    """Six places in turn: the copies never exceed their bytes (not even while one is made) or
    their count, the most recent come back by a load, the oldest are gone."""
    tokens = engine.tokenize(SOURCE)
    places = [tokens[i * 2000:i * 2000 + 300] for i in range(6)]
    engine.reset()
    engine.read(places[0], threading.Event())
    one = engine.saved_size(WINDOW)
    windows = WarmWindows(keep=4, max_bytes=int(3.5 * one))
    for place in places:
        windows.prepare(engine, place)
        engine.read(place, threading.Event())
        assert windows.bytes <= windows.max_bytes and len(windows) <= 4
    assert len(windows) == 3  # and the live one: four places warm
    assert windows.prepare(engine, places[4]) == len(places[4]) - 1 and windows.loads == 1
    assert engine.held(WINDOW) == places[4][:-1]
    assert windows.prepare(engine, places[0]) == 0, "the oldest was dropped"


def test_moving_between_two_documents_reuses_their_kv(worker):
    w = worker
    s = settings(0)  # always the full prompt: what is counted is the reading
    a, b = place(30), place(70)
    w.local.engine.reset()
    w.local.windows.clear()
    ra = w.complete(*a, "argparse.py", s).result()
    rb = w.complete(*b, "argparse.py", s).result()
    assert ra.n_prompt - ra.n_reused > 500 and rb.n_prompt - rb.n_reused > 100
    steps = w.local.engine.decode_steps
    back = w.complete(*a, "argparse.py", s).result()
    assert back.n_reused == back.n_prompt - 1, "A's cache came back from memory, not read again"
    assert w.local.windows.loads >= 1
    assert w.local.engine.decode_steps - steps == back.decode_steps + 1  # one prompt token, then the decoding
    forth = w.complete(*b, "argparse.py", s).result()
    assert forth.n_reused == forth.n_prompt - 1


def test_the_converted_model_is_made_once_and_a_damaged_one_is_rebuilt(model_path, caplog):
    target = converted_path(model_path)
    first = weights_path(model_path)
    assert first == target and target.exists()
    made = target.stat().st_mtime_ns
    assert weights_path(model_path) == target and target.stat().st_mtime_ns == made  # reused, not made again
    target.write_bytes(b"GGUF garbage")  # a header that fails the check
    with caplog.at_level(logging.WARNING, logger="specfill"):
        assert weights_path(model_path) == target
    assert "is damaged" in caplog.text and target.stat().st_size > 1_000_000
    # a body cut in half: the header passes, llama.cpp refuses it, the worker converts it again
    with target.open("r+b") as f:
        f.truncate(target.stat().st_size // 2)
    w = ModelWorker()
    try:
        w.load(settings(0)).result()
        assert "was unreadable" in (w.warning or "") and "converted it again" in w.warning
        assert w.complete("def add(a, b):\n    return", "", "x.py", settings(0)).result().tokens
    finally:
        w.shutdown()


def test_shipped_weights_are_used_as_they_are(model_path):
    assert weights_path(model_path, "shipped") == model_path


def llama_log(code: str) -> str:
    env = {**os.environ, "SPECFILL_LLAMA_LOG": "1"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         check=True)
    return run.stderr


def test_one_extra_buffer_type_is_taken_out_by_name_and_the_others_kept(model_path):
    """AMX crashed one machine; this one has none, so the same mechanism is shown on CPU_REPACK."""
    q4_0 = weights_path(model_path)
    load = f"from speculative.engine import Engine; e = Engine({str(q4_0)!r}, n_ctx=512); print(e.buffer_types)"
    kept = llama_log(load)
    assert "CPU_REPACK" in kept  # the Q4_0 weights repacked
    dropped = llama_log("from speculative.cpu_buffers import extra_buffer_types; "
                        "assert extra_buffer_types(('CPU_REPACK',)) == (); " + load)
    assert "CPU_REPACK" not in dropped and "CPU model buffer" in dropped


def test_engine_without_repack(model_path):
    e = Engine(weights_path(model_path), n_ctx=512, repack=False)
    try:
        assert e.buffer_types == () and e.generate(e.tokenize("def f(x):\n    return"), max_tokens=4).tokens
    finally:
        e.close()
