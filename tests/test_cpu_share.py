"""Fewer decode threads while other processes hold cores: the estimate from /proc/stat, the
engine's logits under any thread count, and the model's server side beside a real busy process."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from decode_helpers import decode
from same_output import assert_same_greedy

from lsp_server.backends.backend import Request
from lsp_server.backends.local import LocalBackend
from lsp_server.backends.read_ahead import ReadAhead
from lsp_server.settings import Settings
from speculative.cpu_share import WINDOW_S, CpuShare, free_threads, read_busy_s

CORES = os.cpu_count() or 1
needs_proc = pytest.mark.skipif(read_busy_s() is None, reason="no /proc/stat here")
needs_cores = pytest.mark.skipif(not 2 <= CORES <= 16, reason="a busy process for every core but one")


def test_free_threads_leave_a_core_to_each_one_other_work_keeps_busy():
    assert free_threads(2, 2, 0.0) == 2
    assert free_threads(2, 2, 0.4) == 2  # a burst, not a core
    assert free_threads(2, 2, 0.5) == 1 and free_threads(2, 2, 1.0) == 1 and free_threads(3, 3, 1.5) == 1
    assert free_threads(2, 2, 2.0) == 1  # never none
    assert free_threads(4, 8, 5.0) == 3
    assert free_threads(4, 8, 1.0) == 4  # capped by the most asked for
    assert free_threads(2, 2, -0.1) == 2  # tick rounding can make it a little negative


def test_the_estimate_counts_other_processes_not_this_one_over_a_window():
    now, busy, own = [0.0], [0.0], [0.0]
    share = CpuShare(cores=2, busy=lambda: busy[0], own=lambda: own[0], clock=lambda: now[0])  # samples once

    def after(seconds: float, machine: float, mine: float) -> float | None:
        now[0] += seconds
        busy[0] += machine * seconds
        own[0] += mine * seconds
        return share.others_busy()

    assert after(WINDOW_S / 2, 1.5, 0.5) is None  # too little history
    assert after(WINDOW_S, 1.5, 0.5) == pytest.approx(1.0)  # this process's half core is not the others'
    assert share.threads(2) == 1
    assert after(WINDOW_S * 2, 2.0, 2.0) == pytest.approx(0.0)  # all of it this process's own
    assert share.threads(2) == 2
    unknown = CpuShare(cores=2, busy=lambda: None)
    assert unknown.others_busy() is None and unknown.threads(2) == 2


def _hogs(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


@needs_proc
@needs_cores
def test_busy_processes_on_all_cores_but_one_leave_one_thread():
    share = CpuShare()
    hogs = _hogs(CORES - 1)
    try:
        share.others_busy()
        time.sleep(4 * WINDOW_S)
        others = share.others_busy()
        assert others is not None and others > CORES - 1.5
        assert share.threads(CORES) == 1
    finally:
        _stop(hogs)


def test_fewer_threads_give_the_same_output(engine):
    tokens = engine.tokenize(Path(threading.__file__).read_text())[:200]

    def read() -> list[np.ndarray]:
        engine.reset()
        rows = engine.eval(tokens[:150], want_rows=[149])
        return rows + [engine.eval([t], want_rows=[0])[0] for t in tokens[150:155]]

    try:
        engine.reset()
        many_text = decode(engine, tokens, max_tokens=32, trace=True)
        many = read()
        engine.use_threads(1)
        assert engine.threads_now == 1
        engine.reset()
        one_text = decode(engine, tokens, max_tokens=32)
        one = read()
    finally:
        engine.use_threads(engine.n_threads)
        engine.reset()
    # Kernels may split a reduction by thread on some CPUs: the logits agree within rounding,
    # and greedy text up to a near-tie (the one cross-path rule).
    assert all(np.allclose(a, b, atol=1e-3, rtol=0) for a, b in zip(many, one, strict=True))
    assert_same_greedy(many_text, one_text.tokens, "one thread against two")


@needs_proc
@needs_cores
@pytest.mark.parametrize("threads", [0, 2])
def test_the_model_runs_on_fewer_threads_beside_busy_processes_unless_told_how_many(threads):
    settings = Settings()
    settings.model.threads = threads
    local = LocalBackend.open(settings, ReadAhead(), threading.Event(), [])
    hogs = _hogs(CORES - 1)
    try:
        assert local.engine.threads_now == (threads or CORES)
        source = Path(threading.__file__).read_text()
        for i in range(8):  # a keystroke each, WINDOW_S apart
            at = len(source) // 2 + i
            req = Request(source[:at], source[at:], threading.__file__, settings, threading.Event(), None, (), 1, False)
            assert local.complete(req) is not None
            time.sleep(WINDOW_S)
        assert local.engine.threads_now == (1 if threads == 0 else 2)
        assert local.stats()["decode_threads"] == local.engine.threads_now
    finally:
        _stop(hogs)
        local.close()
