"""How many decode threads to run while other work holds some of the cores (Linux's /proc/stat).

llama.cpp's threads meet after every graph node, so one thread waiting for a core another
process holds stalls them all: with one of two cores busy elsewhere, two threads decode
slower than one (docs/performance.md). Thread counts give the same logits, so this changes
speed only.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable

WINDOW_S = 0.25  # the least history behind an estimate: /proc/stat counts in 10 ms ticks


def free_threads(most: int, cores: int, others_busy: float) -> int:
    """Threads to run: at most `most`, and one core fewer than the machine has for each core
    other work keeps busy (to the nearest core, a half rounded up), but at least one."""
    return max(1, min(most, cores - int(max(0.0, others_busy) + 0.5)))


def read_busy_s() -> float | None:
    """CPU time the whole machine has spent busy, in seconds (time stolen by a hypervisor
    counts: a thread waits for it as for another process); None where /proc/stat is not."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class CpuShare:
    """Samples the machine's busy time and this process's, and says how many cores other
    processes kept busy over the last WINDOW_S or more."""

    def __init__(self, cores: int | None = None, busy: Callable[[], float | None] = read_busy_s,
                 own: Callable[[], float] = time.process_time, clock: Callable[[], float] = time.monotonic) -> None:
        self.cores = cores or os.cpu_count() or 1
        self._busy, self._own, self._clock = busy, own, clock
        self._samples: deque[tuple[float, float, float]] = deque(maxlen=64)  # (wall, machine busy, own) seconds
        self.last: float | None = None  # the last estimate
        self.others_busy()  # history from now on: the first request after a load has an estimate

    def others_busy(self) -> float | None:
        """Cores other processes kept busy lately, sampling now; None until WINDOW_S has passed
        since the first sample (or without /proc/stat)."""
        busy = self._busy()
        if busy is None:
            return None
        now = (self._clock(), busy, self._own())
        before = next((s for s in reversed(self._samples) if now[0] - s[0] >= WINDOW_S), None)
        if not self._samples or now[0] - self._samples[-1][0] >= WINDOW_S / 8:  # history spans a few windows
            self._samples.append(now)
        if before is None:
            return None
        self.last = ((now[1] - before[1]) - (now[2] - before[2])) / (now[0] - before[0])
        return self.last

    def threads(self, most: int) -> int:
        """Decode threads to run now, at most `most`."""
        others = self.others_busy()
        return most if others is None else free_threads(most, self.cores, others)
