"""How many drafted tokens to verify: measured verify costs against expected acceptance.

Verifying [last, d1..dk] costs verify_ms(k+1) (k+1 logits rows); plain decoding costs
verify_ms(1) a token. With per-token acceptance p the step yields 1 + p + p^2 + .. + p^k
tokens (the target always adds one of its own). The chosen k maximises tokens per ms;
k = 0 is plain decoding, so speculation is only chosen when it is expected to win.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from speculative.errors import Cancelled

PROFILE_KS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32)
MAX_VERIFY = PROFILE_KS[-1]
PROFILE_VERSION = "v4-seqs"  # part of the cache key: a changed profile or engine is measured anew


@dataclass
class CostModel:
    verify_ms: dict[int, float]  # batch size (rows with logits) -> ms, profiled at load
    margin: float = 1.03  # a draft must beat plain by this factor: noise and Python overhead
    live_ms: dict[int, float] = field(default_factory=dict)  # running means of real steps
    live_n: dict[int, int] = field(default_factory=dict)
    not_saved: str | None = None  # why the profiled table could not be cached (full or read-only disk)

    def observe(self, n: int, ms: float) -> None:
        """Learn from a real step: the context depth and the machine's load move the costs."""
        seen = self.live_n.get(n, 0)
        if seen:
            ms = min(ms, 3 * self.live_ms[n])  # one stall must not make drafting look free
        self.live_ms[n] = ms if not seen else 0.9 * self.live_ms[n] + 0.1 * ms
        self.live_n[n] = seen + 1

    def cost(self, n: int) -> float:
        """Cost of evaluating n rows: the running mean once seen 3 times, else the profile
        (interpolated), scaled by how far real one-row steps have drifted from it."""
        if self.live_n.get(n, 0) >= 3:
            return self.live_ms[n]
        base = self._profiled(n)
        if self.live_n.get(1, 0) >= 3:
            base *= self.live_ms[1] / self._profiled(1)
        return base

    def _profiled(self, n: int) -> float:
        ks = sorted(self.verify_ms)
        if n <= ks[0]:
            return self.verify_ms[ks[0]] * n / ks[0]
        for lo, hi in zip(ks, ks[1:], strict=False):
            if n <= hi:
                w = (n - lo) / (hi - lo)
                return self.verify_ms[lo] * (1 - w) + self.verify_ms[hi] * w
        top = ks[-1]
        return self.verify_ms[top] * n / top

    def choose(self, ps: Sequence[float], draft_ms_per_token: float = 0.0) -> int:
        """Draft length in 0..len(ps) with the most expected tokens per ms; 0 = do not draft.

        ps[i] is the chance that draft token i+1 is accepted given that those before it were:
        the step then yields 1 + ps[0] + ps[0]*ps[1] + ... tokens.
        """
        best_k, best_rate = 0, self.margin / self.cost(1)
        expected, run = 1.0, 1.0
        for k, p in enumerate(ps[: MAX_VERIFY - 1], 1):
            run *= p
            expected += run
            rate = expected / (self.cost(k + 1) + k * draft_ms_per_token)
            if rate > best_rate:
                best_k, best_rate = k, rate
        return best_k


def cache_dir() -> Path:
    return Path(os.environ.get("SPECFILL_CACHE_DIR") or Path.home() / ".cache" / "specfill")


def _cache_key(model_path: Path, threads: int, build: str) -> str:
    st = model_path.stat()
    raw = f"{model_path.resolve()}|{st.st_size}|{st.st_mtime_ns}|threads={threads}|{build}|{PROFILE_VERSION}"
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def profile_verify_costs(engine, reps: int = 3, depth: int = 1024,
                         stop: threading.Event | None = None) -> dict[int, float]:
    """Median ms to evaluate k tokens with a logits row each, after `depth` tokens of context
    (attention makes each row dearer as the context grows; 1,024 is a typical prompt).
    `stop` (a server shutting down) ends it with Cancelled between evaluations."""
    depth = min(depth, engine.n_ctx // 2)
    seed = (engine.tokenize("def f(x):\n    return x + 1\n\n") * (depth // 4 + 1))[:depth]
    engine.reset()
    engine.eval(seed, cancel=stop)
    filler = seed[: MAX_VERIFY]
    costs: dict[int, float] = {}
    engine.eval(filler[:4], want_rows=range(4))  # warm-up
    engine.truncate(len(seed))
    for k in PROFILE_KS:
        times = []
        for _ in range(reps):
            if stop is not None and stop.is_set():
                raise Cancelled("cost profile stopped")
            t0 = time.perf_counter()
            engine.eval(filler[:k], want_rows=range(k))
            times.append((time.perf_counter() - t0) * 1000)
            engine.truncate(len(seed))
        costs[k] = statistics.median(times)
    engine.reset()
    return costs


def load_cost_model(engine, threads: int, build: str, refresh: bool = False,
                    stop: threading.Event | None = None) -> CostModel:
    """The cost table for this model file, thread count and build: cached, else profiled."""
    path = cache_dir() / "verify_costs.json"
    key = _cache_key(engine.path, threads, f"{build}|{'+'.join(getattr(engine, 'buffer_types', ()))}")
    table: dict = {}
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        table = {}
    entry = table.get(key)
    if entry and not refresh:
        return CostModel({int(k): float(v) for k, v in entry["verify_ms"].items()})
    costs = profile_verify_costs(engine, stop=stop)
    table[key] = {"model": str(engine.path), "threads": threads, "build": build, "verify_ms": costs}
    model = CostModel(costs)
    tmp = path.with_suffix(".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(table, indent=1))
        tmp.replace(path)  # the old table stays whole until the new one is
    except OSError as exc:
        # A full or read-only cache dir costs a re-profile at the next load, nothing else.
        model.not_saved = (f"cost table not saved in {path.parent}: {exc.strerror or exc}; "
                           "it is measured again at the next load")
        with contextlib.suppress(OSError):
            tmp.unlink()
    return model
