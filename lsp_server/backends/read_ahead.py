"""When the model thread reads a full prompt in the background, and when that read stops.

One full prompt at most is pending: the one of the place the last request (or didFocus) was
at. It is read between requests, a chunk at a time, and yields at once to any request
submitted and not yet started, and to the cursor moving elsewhere (a newer didFocus).
Counters, each written by one thread only, rather than events handed between threads: a
swapped event let a read outlive the request that should have stopped it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence


class ReadCancel:
    """A read's stop condition, as the engine asks it between chunks (`is_set`)."""

    def __init__(self, schedule: ReadAhead, focus: int) -> None:
        self._schedule, self._focus = schedule, focus

    def is_set(self) -> bool:
        s = self._schedule
        return s.submitted != s.started or s.focus != self._focus or s.closing.is_set()


class ReadAhead:
    def __init__(self) -> None:
        self.pending: list[int] | None = None  # the full prompt to read while idle
        self.queued = False  # a read of it is on the model thread's queue
        self.submitted = 0  # requests and loads submitted (by callers, under the lock)
        self.started = 0  # of those, started (by the model thread)
        self.focus = 0  # didFocus notifications seen
        self.closing = threading.Event()  # shutting down: everything yields
        self._lock = threading.Lock()

    def submit(self) -> None:
        """A request or a load is on its way (any thread): a running read yields to it."""
        with self._lock:
            self.submitted += 1

    def start(self) -> None:
        """The model thread starts what was submitted."""
        self.started += 1

    def waiting(self) -> bool:
        """Work submitted and not started: another session's request (the shared server),
        or a newer keystroke that is about to supersede what runs."""
        return self.submitted != self.started

    def moved(self) -> int:
        """The cursor landed somewhere else (didFocus): a read of the place left stops."""
        self.focus += 1
        return self.focus

    def read_cancel(self, focus: int | None = None) -> ReadCancel:
        """The stop condition of a read for the cursor's place now (or a didFocus's)."""
        return ReadCancel(self, self.focus if focus is None else focus)

    def want(self, tokens: Sequence[int] | None) -> None:
        """The full prompt to read next while idle; None: nothing (the current one was read)."""
        self.pending = list(tokens) if tokens is not None else None

    def take(self) -> bool:
        """Whether to queue a read now: something is pending and no read of it is queued."""
        if self.pending is None or self.queued:
            return False
        self.queued = True
        return True

    def begin(self) -> list[int] | None:
        """The queued read begins: what it reads."""
        self.queued = False
        return self.pending
