"""The engine's background reading (stopped within a chunk, or inside its decode, keeping what
it read exact) and the copies of places kept warm."""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from decode_helpers import decode

from speculative.engine import FULL, SHORT, Engine
from speculative.errors import Cancelled
from speculative.warm_places import WarmPlaces

SOURCE = Path(argparse.__file__).read_text()


def test_a_background_read_stops_within_one_chunk_of_a_request(engine):
    tokens = engine.tokenize(SOURCE)[:1200]
    engine.reset()
    stop = threading.Event()
    reader = threading.Thread(target=lambda: pytest.raises(Cancelled, engine.read, tokens, stop, chunk=32))
    reader.start()
    while len(engine.held(FULL)) < 64:
        time.sleep(0.001)
    stop.set()
    at_stop = len(engine.held(FULL))
    reader.join()
    assert 0 <= len(engine.held(FULL)) - at_stop <= 32 < len(tokens) - at_stop
    assert engine.held(FULL) == tokens[: len(engine.held(FULL))]  # what was read stays read


def test_stop_reading_stops_a_read_inside_its_decode_and_what_it_keeps_is_exact(engine, model_path):
    tokens = engine.tokenize(SOURCE)[:400]
    never = threading.Event()  # the read would otherwise stop only between chunks
    engine.reset()
    engine.read(tokens[:41], never)  # 40 tokens held: the stopped read must keep them
    engine.abort_read()  # no read runs: nothing happens, now or later
    assert decode(engine, tokens[:41], max_tokens=4).stop_reason != "cancelled"
    done = threading.Event()

    def stopper() -> None:
        while not done.is_set():
            engine.abort_read()
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
    held = engine.held(FULL)
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


def test_saved_windows_stay_within_their_bounds_and_come_back(engine):
    """Six places in turn: the copies never exceed their bytes (not even while one is made) or
    their count, the most recent come back by a load, the oldest are gone."""
    tokens = engine.tokenize(SOURCE)
    places = [tokens[i * 2000:i * 2000 + 300] for i in range(6)]
    engine.reset()
    engine.read(places[0], threading.Event())
    one = engine.saved_size(FULL)
    windows = WarmPlaces(keep=4, max_bytes=int(3.5 * one))
    for place in places:
        windows.prepare(engine, place)
        engine.read(place, threading.Event())
        assert windows.bytes <= windows.max_bytes and len(windows) <= 4
    assert len(windows) == 3  # and the live one: four places warm
    assert windows.prepare(engine, places[4]) == len(places[4]) - 1 and windows.loads == 1
    assert engine.held(FULL) == places[4][:-1]
    assert windows.prepare(engine, places[0]) == 0, "the oldest was dropped"


def test_a_small_file_typed_beside_another_window_comes_back_by_a_load(engine):
    """Two windows typing in turn, one on a file of a few lines: its cache is kept as the other
    one's is, not read again at each of its keystrokes."""
    tokens = engine.tokenize(SOURCE)
    small, other = tokens[:64], tokens[5000:5300]
    engine.reset()
    windows = WarmPlaces()
    for place in (small, other):
        windows.prepare(engine, place)
        engine.read(place, threading.Event())
    assert windows.prepare(engine, small) == len(small) - 1 and windows.loads == 1
    assert engine.held(FULL) == small[:-1]


def test_short_prompts_of_other_places_give_way_when_the_cells_run_out(engine):
    """Two short prompts kept beside the full one: a full prompt that needs their cells drops
    short prompts, only as many as it needs (a failed decode would lose the request)."""
    tokens = engine.tokenize(SOURCE)
    engine.reset()
    engine.read(tokens[:300], threading.Event(), SHORT)
    engine.read(tokens[300:600], threading.Event(), SHORT + 1)
    need = engine.n_ctx - 500  # beside one short prompt, not beside two
    engine.make_room(FULL, need)
    assert engine.held(SHORT) == [] and engine.held(SHORT + 1) == tokens[300:599]  # a read keeps all but the last
    engine.read(tokens[:need], threading.Event(), FULL)
    assert engine.held(FULL) == tokens[:need - 1]
    engine.reset()
