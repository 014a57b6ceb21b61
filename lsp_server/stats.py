"""Live counters and latency percentiles of one server, for `specfill/stats`."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from speculative.percentile import pct

WINDOW = 1000  # latencies kept for percentiles: recent behaviour, bounded memory


def percentiles(values, qs=(0.5, 0.95, 0.99)) -> dict[str, float]:
    return {f"p{round(q * 100)}": pct(values, q) for q in qs}


@dataclass
class Stats:
    requests: int = 0
    cancelled: int = 0
    cache_hits: int = 0
    errors: int = 0
    superseded: int = 0  # generations stopped by a newer request or a cancel
    shown: int = 0
    accepted: int = 0
    accepted_chars: int = 0
    drafted: int = 0
    draft_accepted: int = 0
    spec_steps: int = 0
    cpu_ms: float = 0.0  # model thread CPU time spent on generations
    ttft_ms: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    latency_ms: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    started: float = field(default_factory=time.time)

    def generation(self, result, cpu_ms: float) -> None:
        if result.stop_reason == "cancelled":
            self.superseded += 1
        self.drafted += result.drafted
        self.draft_accepted += result.accepted
        self.spec_steps += result.spec_steps
        self.cpu_ms += cpu_ms
        self.ttft_ms.append(result.ttft_ms)

    def report(self, extra: dict | None = None) -> dict:
        return {
            "requests": self.requests, "cancelled": self.cancelled, "cache_hits": self.cache_hits,
            "errors": self.errors, "superseded": self.superseded, "shown": self.shown, "accepted": self.accepted,
            "ttft_ms": percentiles(self.ttft_ms), "latency_ms": percentiles(self.latency_ms),
            "accepted_per_step": self.draft_accepted / self.spec_steps if self.spec_steps else 0.0,
            "acceptance_rate": self.draft_accepted / self.drafted if self.drafted else 0.0,
            "accept_rate": self.accepted / self.shown if self.shown else 0.0,
            "cpu_ms_per_accepted_char": self.cpu_ms / self.accepted_chars if self.accepted_chars else None,
            "uptime_s": time.time() - self.started,
            **(extra or {}),
        }
