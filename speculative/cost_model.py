"""How many drafted tokens to verify: measured verify costs against expected acceptance.

Verifying [last, d1..dk] costs verify_ms(k+1) (k+1 logits rows); plain decoding costs
verify_ms(1) a token. With per-token acceptance p the step yields 1 + p + p^2 + .. + p^k
tokens (the target always adds one of its own). The chosen k maximises tokens per ms;
k = 0 is plain decoding, so speculation is only chosen when it is expected to win.
"""

from __future__ import annotations

import bisect
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

from speculative.build_info import build_info
from speculative.errors import Cancelled

# Every size to 17 rows: llama.cpp's repacked kernels take rows in groups of 4 and the rest
# one by one, so costs climb in stairs (7 rows cost what 8 do) that interpolation would miss.
PROFILE_KS = (*range(1, 18), 20, 24, 28, 32)
MAX_VERIFY = PROFILE_KS[-1]
PROFILE_VERSION = "v6-read-rate"  # part of the cache key: a changed profile or engine is measured anew
PROFILE_DEPTH = 1024  # tokens of context the table is measured after: a typical prompt
# Attention reads the whole context for every row, so depth moves costs a lot, and batched
# rows more than one row (docs/speculation.md). Drift is learned per band of depth: a short prompt and a long one
# served in turn each keep their own, instead of one running mean swinging between them.
DEPTH_BANDS = (512, 1536, 3072)


def _key(n: int, depth: int | None) -> tuple[str, int]:
    band = bisect.bisect_right(DEPTH_BANDS, PROFILE_DEPTH if depth is None else depth)
    return ("one" if n == 1 else "batch"), band


@dataclass
class ReadRate:
    """What reading prompt tokens costs: ms a token at depth 0 plus ms a token per token of
    depth (attention reads every cell before it), profiled by reading a prompt the way
    requests do, times the drift learned from real reads."""

    base_ms: float
    depth_ms: float
    scale: float = 1.0
    seen: int = 0

    def ms(self, start: int, n: int) -> float:
        """ms to read n tokens after `start` tokens of context."""
        return self.scale * n * (self.base_ms + self.depth_ms * (start + n / 2))

    def tokens_within(self, ms: float, start: int = 0) -> int:
        """The most tokens that can be read within `ms` after `start` tokens of context."""
        a = self.scale * self.depth_ms / 2
        b = self.scale * (self.base_ms + self.depth_ms * start)
        if a <= 0:
            return int(ms / b) if b > 0 else 0
        return int((-b + (b * b + 4 * a * ms) ** 0.5) / (2 * a))

    def observe(self, n: int, depth: int, ms: float) -> None:
        """A real read of n tokens after `depth`: learn how far the machine has drifted."""
        predicted = self.ms(depth, n) / self.scale
        if predicted <= 0:
            return
        ratio = ms / predicted
        if self.seen:
            ratio = min(ratio, 3 * self.scale)  # one stall must not make every prompt look too long
        self.scale = ratio if not self.seen else 0.8 * self.scale + 0.2 * ratio
        self.seen += 1


@dataclass
class CostModel:
    verify_ms: dict[int, float]  # batch size (rows with logits) -> ms, profiled at load
    read: ReadRate = field(default_factory=lambda: ReadRate(2.0, 0.0))  # profiled at load
    margin: float = 1.03  # a draft must beat plain by this factor: noise and Python overhead
    scale: dict[tuple[str, int], float] = field(default_factory=dict)  # running observed / profiled
    seen: dict[tuple[str, int], int] = field(default_factory=dict)
    not_saved: str | None = None  # why the profiled table could not be cached (full or read-only disk)
    measured: bool = False  # profiled by this load, not read from the cache

    def __post_init__(self) -> None:
        # More rows never cost less: a profile measured under load can say so, and a verify
        # priced below a plain step would make drafting look free.
        top = 0.0
        for n in sorted(self.verify_ms):
            top = self.verify_ms[n] = max(self.verify_ms[n], top)

    def observe(self, n: int, ms: float, depth: int | None = None) -> None:
        """Learn from a real step, `depth` tokens into the context, how far costs have drifted
        from the profile. One-row and batched steps drift apart (depth and the machine's load
        weigh more on batched rows), so each keeps its own ratio per band of depth, learned from
        every step of its kind: a rarely chosen size is priced from the others."""
        key, ratio = _key(n, depth), ms / self._profiled(n)
        seen = self.seen.get(key, 0)
        if seen:
            ratio = min(ratio, 3 * self.scale[key])  # one stall must not make drafting look free
        self.scale[key] = ratio if not seen else 0.9 * self.scale[key] + 0.1 * ratio
        self.seen[key] = seen + 1

    def cost(self, n: int, depth: int | None = None) -> float:
        """Cost of evaluating n rows `depth` tokens in: the profile (interpolated) times the
        drift learned from three or more real steps of its kind at that depth; batched sizes
        follow one-row drift until they have been seen."""
        kind, band = _key(n, depth)
        key = next((k for k in ((kind, band), ("one", band)) if self.seen.get(k, 0) >= 3), None)
        ms = self._profiled(n) * (self.scale[key] if key else 1.0)
        # Drift learned apart (one-row steps slowed by load) must not price a batch below a step.
        return max(ms, self.cost(1, depth)) if n > 1 else ms

    def _profiled(self, n: int) -> float:
        if n in self.verify_ms:  # every size to 17 is profiled: no search on the hot path
            return self.verify_ms[n]
        ks = sorted(self.verify_ms)
        if n <= ks[0]:
            return self.verify_ms[ks[0]] * n / ks[0]
        for lo, hi in zip(ks, ks[1:], strict=False):
            if n <= hi:
                w = (n - lo) / (hi - lo)
                return self.verify_ms[lo] * (1 - w) + self.verify_ms[hi] * w
        top = ks[-1]
        return self.verify_ms[top] * n / top

    def choose(self, ps: Sequence[float], draft_ms_per_token: float = 0.0, depth: int | None = None,
               draft_ms: float = 0.0) -> int:
        """Draft length in 0..len(ps) with the most expected tokens per ms; 0 = do not draft.

        ps[i] is the chance that draft token i+1 is accepted given that those before it were:
        the step then yields 1 + ps[0] + ps[0]*ps[1] + ... tokens. `draft_ms`: what drafting
        costs whatever its length (a draft model's read of tokens its context lacks).
        """
        best_k, best_rate = 0, self.margin / self.cost(1, depth)
        expected, run = 1.0, 1.0
        for k, p in enumerate(ps[: MAX_VERIFY - 1], 1):
            run *= p
            expected += run
            rate = expected / (self.cost(k + 1, depth) + k * draft_ms_per_token + draft_ms)
            if rate > best_rate:
                best_k, best_rate = k, rate
        return best_k


def cache_dir() -> Path:
    return Path(os.environ.get("SPECFILL_CACHE_DIR") or Path.home() / ".cache" / "specfill")


FINGERPRINT_BYTES = 1 << 20


def _fingerprint(model_path: Path) -> str:
    """The model file by its content, cheaply: its size, its first MiB (a GGUF's header: the
    metadata and every tensor's shape and type, which is what the costs depend on) and its last.
    A copy, a renamed file or a pull of the same file elsewhere keeps its profile."""
    h = hashlib.sha256()
    with model_path.open("rb") as f:
        size = f.seek(0, 2)
        for at in (0, max(0, size - FINGERPRINT_BYTES)):
            f.seek(at)
            h.update(f.read(FINGERPRINT_BYTES))
    return f"{size}:{h.hexdigest()}"


def _cache_key(model_path: Path, threads: int, build: str) -> str:
    raw = f"{_fingerprint(model_path)}|threads={threads}|{build}|{PROFILE_VERSION}"
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def profile_verify_costs(engine, reps: int = 3, depth: int = PROFILE_DEPTH,
                         stop: threading.Event | None = None) -> dict[int, float]:
    """Median ms to evaluate k tokens with a logits row each, after `depth` tokens of context
    (attention makes each row dearer as the context grows; 1,024 is a typical prompt).
    Each pass measures every size once, so a slow spell of the machine (a VM's neighbours)
    lands on all sizes alike rather than bending the table's shape.
    `stop` (a server shutting down) ends it with Cancelled between evaluations."""
    depth = min(depth, engine.n_ctx // 2)
    seed = (engine.tokenize("def f(x):\n    return x + 1\n\n") * (depth // 4 + 1))[:depth]
    engine.reset()
    engine.eval(seed, cancel=stop)
    filler = seed[: MAX_VERIFY]
    times: dict[int, list[float]] = {k: [] for k in PROFILE_KS}
    for k in (1, 4, 16):  # warm-up
        engine.eval(filler[:k], want_rows=range(k))
        engine.truncate(len(seed))
    for _ in range(reps):
        for k in PROFILE_KS:
            if stop is not None and stop.is_set():
                raise Cancelled("cost profile stopped")
            t0 = time.perf_counter()
            engine.eval(filler[:k], want_rows=range(k))
            times[k].append((time.perf_counter() - t0) * 1000)
            engine.truncate(len(seed))
    engine.reset()
    return {k: statistics.median(v) for k, v in times.items()}


def profile_read_rate(engine, depth: int = PROFILE_DEPTH, reps: int = 2,
                      stop: threading.Event | None = None) -> ReadRate:
    """Read a `depth`-token prompt as requests do (n_batch tokens a decode, one logits row at
    its end), `reps` times; fit ms a token against the depth each batch starts at."""
    depth = min(depth, engine.n_ctx // 2)
    seed = (engine.tokenize("def f(x):\n    return x + 1\n\n") * (depth // 4 + 1))[:depth]
    step = engine.n_batch
    times: dict[int, list[float]] = {}
    for _ in range(reps):
        engine.reset()
        for start in range(0, depth - step + 1, step):
            if stop is not None and stop.is_set():
                raise Cancelled("cost profile stopped")
            t0 = time.perf_counter()
            engine.eval(seed[start:start + step], want_rows=[step - 1])
            times.setdefault(start, []).append((time.perf_counter() - t0) * 1000 / step)
    engine.reset()
    xs = [start + step / 2 for start in times]
    ys = [statistics.median(v) for v in times.values()]
    if len(xs) < 2:
        return ReadRate(ys[0] if ys else 2.0, 0.0)
    slope, intercept = statistics.linear_regression(xs, ys)
    slope = max(0.0, slope)
    return ReadRate(max(intercept, 0.1 * statistics.fmean(ys)), slope)


def load_cost_model(engine, threads: int, build: str, refresh: bool = False,
                    stop: threading.Event | None = None) -> CostModel:
    """The cost table for this model file, thread count and build: cached, else profiled."""
    path = cache_dir() / "verify_costs.json"
    kernels = "+".join(build_info()["kernels"])  # an AVX2 build prices rows unlike an AVX-512 one
    key = _cache_key(engine.path, threads, f"{build}|{'+'.join(getattr(engine, 'buffer_types', ()))}|{kernels}")
    table: dict = {}
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        table = {}
    entry = table.get(key)
    if entry and not refresh:
        return CostModel({int(k): float(v) for k, v in entry["verify_ms"].items()}, ReadRate(*entry["read_ms"]))
    costs = profile_verify_costs(engine, stop=stop)
    read = profile_read_rate(engine, stop=stop)
    table[key] = {"model": str(engine.path), "threads": threads, "build": build, "verify_ms": costs,
                  "read_ms": [read.base_ms, read.depth_ms]}
    model = CostModel(costs, read, measured=True)
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
