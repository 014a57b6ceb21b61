"""Aborting a background read inside its decode, from another thread.

A read can be stopped inside a decode, not only between chunks: a keystroke would otherwise
wait for the chunk to end. llama.cpp's abort callback is C's strlen on a flag byte, so no
Python and no GIL run per graph node. The flag is set only while a read runs (under the lock),
so a generation's decode is never aborted.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import llama_cpp


def _flag_is_set() -> Any:
    """An abort callback that needs no Python: C's strlen on a flag byte (a nonzero length,
    returned as a C bool, is true). llama.cpp asks it after every node of a decode's graph
    (~650 a decode) from its compute thread; a Python callback took the GIL each time, and
    with another thread running Python a background read slowed many times over
    (docs/performance.md). None where there is no libc."""
    try:
        address = ctypes.cast(ctypes.CDLL(None).strlen, ctypes.c_void_p).value
    except (OSError, AttributeError, TypeError):
        return None
    return llama_cpp.ggml_abort_callback(address) if address else None


_FLAG_IS_SET = _flag_is_set()


class ReadAbort:
    """The flag byte of one context: armed while a read runs, set by `abort`."""

    def __init__(self, ctx: Any) -> None:
        self._flag = ctypes.create_string_buffer(2)  # byte 0 nonzero: abort (byte 1 ends the string)
        self._armed = False
        self._lock = threading.Lock()
        if _FLAG_IS_SET is not None:
            llama_cpp.llama_set_abort_callback(ctx, _FLAG_IS_SET, ctypes.cast(self._flag, ctypes.c_void_p))

    @contextmanager
    def armed(self) -> Iterator[None]:
        with self._lock:
            self._armed, self._flag[0] = True, b"\0"
        try:
            yield
        finally:
            with self._lock:
                self._armed, self._flag[0] = False, b"\0"

    def abort(self) -> None:
        """Abort the armed read's decode now (a no-op when no read runs)."""
        with self._lock:
            if self._armed:
                self._flag[0] = b"\1"
