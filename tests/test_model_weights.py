"""The weights: converted once (a damaged conversion rebuilt), shipped weights used as they
are, and llama.cpp's extra buffer types taken out by name."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

from decode_helpers import decode
from test_cold_start import settings

from lsp_server.backends.worker import ModelWorker
from speculative.convert import converted_path, weights_path
from speculative.engine import Engine


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
    """AMX crashed one machine and is taken out on every machine; the same mechanism is shown
    on CPU_REPACK, which every x86 machine has."""
    q4_0 = weights_path(model_path)
    load = f"from speculative.engine import Engine; e = Engine({str(q4_0)!r}, n_ctx=512); print(e.buffer_types)"
    kept = llama_log(load)
    assert "CPU_REPACK" in kept and "AMX" not in kept  # the Q4_0 weights repacked; AMX never used
    dropped = llama_log("from speculative.cpu_buffers import UNSAFE, extra_buffer_types; "
                        "assert extra_buffer_types(UNSAFE + ('CPU_REPACK',)) == (); " + load)
    assert "CPU_REPACK" not in dropped and "AMX" not in dropped and "CPU model buffer" in dropped


def test_engine_without_repack(model_path):
    e = Engine(weights_path(model_path), n_ctx=512, repack=False)
    try:
        assert e.buffer_types == () and decode(e, e.tokenize("def f(x):\n    return"), max_tokens=4).tokens
    finally:
        e.close()
