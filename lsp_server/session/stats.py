"""Live counters and latency percentiles of one server, for `specfill/stats`."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from lsp_server.backends.backend import Completion

LATENCIES_KEPT = 1000  # latencies kept for percentiles: recent behaviour, bounded memory
COLD_TOKENS = 64  # a generation that had more of its prompt to read than this was a cold one


def pct(values: Iterable[float], q: float) -> float:
    """The q-quantile (0..1) with linear interpolation between ranks; 0.0 for no values."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


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
    short: int = 0  # answered from the short prompt while the full one was read
    draft_answers: int = 0  # of those, answered by the draft model while the heavier target read
    healed: int = 0  # generations that regenerated a half-typed word
    hidden: int = 0  # suggestions not shown: the model doubted their first token (minConfidence)
    cut: int = 0  # suggestions cut before a doubted token
    words: int = 0  # suggestions cut inside a word the file's words completed (lsp_server/words.py)
    word_answers: int = 0  # answered with the word being typed while the model had nothing yet (WORD_AFTER_MS)
    grown: int = 0  # answers cut short of their line whose line then came whole (the editor asks again)
    after_accept: int = 0  # suggestions generated ahead, as if the one shown were accepted
    ttft_ms: deque = field(default_factory=lambda: deque(maxlen=LATENCIES_KEPT))
    ttft_cold_ms: deque = field(default_factory=lambda: deque(maxlen=LATENCIES_KEPT))
    ttft_warm_ms: deque = field(default_factory=lambda: deque(maxlen=LATENCIES_KEPT))
    latency_ms: deque = field(default_factory=lambda: deque(maxlen=LATENCIES_KEPT))
    # A keystroke to the suggestion the model made for it, or that waited for a generation under way:
    # what the status bar shows (the type-through cache's instant answers and the empty ones would
    # make latency_ms's median say 0).
    new_suggestion_ms: deque = field(default_factory=lambda: deque(maxlen=LATENCIES_KEPT))
    started: float = field(default_factory=time.time)

    def generation(self, result: Completion) -> None:
        if result.stop_reason == "cancelled":
            self.superseded += 1
        self.drafted += result.drafted
        self.draft_accepted += result.accepted
        self.spec_steps += result.spec_steps
        self.cpu_ms += result.cpu_ms
        self.ttft_ms.append(result.ttft_ms)
        cold = result.short or result.n_prompt - result.n_reused > COLD_TOKENS
        (self.ttft_cold_ms if cold else self.ttft_warm_ms).append(result.ttft_ms)
        self.short += result.short
        self.draft_answers += result.by_draft
        self.healed += bool(result.healed)
        if result.stop_reason == "confidence":
            if result.text:
                self.cut += 1
            else:
                self.hidden += 1
        self.words += result.stop_reason == "word"

    def report(self, extra: dict | None = None) -> dict:
        return {
            "requests": self.requests, "cancelled": self.cancelled, "cache_hits": self.cache_hits,
            "errors": self.errors, "superseded": self.superseded, "shown": self.shown, "accepted": self.accepted,
            "ttft_ms": percentiles(self.ttft_ms), "latency_ms": percentiles(self.latency_ms),
            "new_suggestion_ms": {**percentiles(self.new_suggestion_ms), "n": len(self.new_suggestion_ms)},
            "ttft_cold_ms": {**percentiles(self.ttft_cold_ms), "n": len(self.ttft_cold_ms)},
            "ttft_warm_ms": {**percentiles(self.ttft_warm_ms), "n": len(self.ttft_warm_ms)},
            "short": self.short, "draft_answers": self.draft_answers, "healed": self.healed, "hidden": self.hidden,
            "cut": self.cut,
            "words": self.words,
            "word_answers": self.word_answers,
            "after_accept": self.after_accept,
            "grown": self.grown,
            "accepted_per_step": self.draft_accepted / self.spec_steps if self.spec_steps else 0.0,
            "acceptance_rate": self.draft_accepted / self.drafted if self.drafted else 0.0,
            "accept_rate": self.accepted / self.shown if self.shown else 0.0,
            "cpu_ms_per_accepted_char": self.cpu_ms / self.accepted_chars if self.accepted_chars else None,
            "uptime_s": time.time() - self.started,
            **(extra or {}),
        }
