"""The decode loop: greedy (or sampled) generation with optional speculative drafts.

Each step feeds [last, d1..dk] to the target in one llama_decode with a logits row for each,
so row i is the target's own distribution after d1..di. Greedy acceptance keeps d(i+1) while
it equals the argmax of row i; the first mismatch is replaced by that argmax (the target's
token), so the output is exactly what plain greedy decoding gives. With temperature > 0 the
token of row i is sampled and the draft kept while the sample matches it, which keeps the
target's distribution. Rejected drafts leave the KV cache with llama_memory_seq_rm.
k = 0 (no draft) is plain decoding, one token a step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from speculative.cost_model import CostModel


class Cancelled(Exception):
    """A prefill stopped by its cancel flag; the part already evaluated stays in the cache."""


@dataclass
class GenerationResult:
    text: str
    tokens: list[int]
    stop_reason: str  # "eog" | "stop" | "max_tokens" | "budget" | "cancelled"
    n_prompt: int
    n_reused: int
    ttft_ms: float
    total_ms: float
    decode_steps: int  # target llama_decode calls after the prompt
    drafted: int = 0  # draft tokens verified
    accepted: int = 0  # draft tokens accepted
    spec_steps: int = 0  # steps that verified a draft
    cpu_ms: float = 0.0  # CPU time of the generating thread, when the caller measures it
    trace: list[dict] = field(default_factory=list)  # per emitted token, when asked for
    alternatives: list[str] = field(default_factory=list)  # other candidates, when asked for

    @property
    def tok_s(self) -> float:
        decode_s = (self.total_ms - self.ttft_ms) / 1000
        return (len(self.tokens) - 1) / decode_s if decode_s > 0 and len(self.tokens) > 1 else 0.0


class _Output:
    """Emitted tokens and their text; decides when generation stops."""

    def __init__(self, token_bytes: Callable[[int], bytes], stop: Sequence[str], max_tokens: int,
                 on_text: Callable[[str], None] | None) -> None:
        self.token_bytes, self.stop, self.max_tokens, self.on_text = token_bytes, stop, max_tokens, on_text
        self.tokens: list[int] = []
        self._bytes = bytearray()
        self.text = ""
        self.reason: str | None = None

    def emit(self, tok: int, is_eog: bool) -> bool:
        """Append one token; False once generation must stop."""
        if is_eog:
            self.reason = "eog"
            return False
        self.tokens.append(tok)
        self._bytes += self.token_bytes(tok)
        new = self._bytes.decode("utf-8", errors="replace")
        hits = [i for s in self.stop if s and (i := new.find(s)) >= 0]
        if hits:
            new, self.reason = new[: min(hits)], "stop"
        if self.on_text and new != self.text and not new.endswith("\ufffd"):
            self.on_text(new)
        self.text = new
        if self.reason is None and len(self.tokens) >= self.max_tokens:
            self.reason = "max_tokens"
        return self.reason is None


def _pick(row: np.ndarray, temperature: float, rng: np.random.Generator | None) -> int:
    if temperature <= 0:
        return int(np.argmax(row))
    z = (row - row.max()) / temperature
    p = np.exp(z, dtype=np.float64)
    return int(rng.choice(row.size, p=p / p.sum()))


def _top2_gap(row: np.ndarray) -> float:
    a, b = np.partition(row, -2)[-2:]
    return float(abs(b - a))


def generate(engine, prompt: Sequence[int], *, max_tokens: int = 64, stop: Sequence[str] = (),
             budget_s: float | None = None, cancel: threading.Event | None = None,
             on_text: Callable[[str], None] | None = None, drafter=None, costs: CostModel | None = None,
             temperature: float = 0.0, seed: int = 0, extra_sources: Sequence[Sequence[int]] = (),
             max_draft: int = 31, trace: bool = False) -> GenerationResult:
    """Generate from `prompt` on `engine`; with a drafter, verify its drafts in batches."""
    if drafter is not None and costs is None:
        raise ValueError("speculation needs a cost model (speculative.cost_model.load_cost_model)")
    t0 = time.perf_counter()
    max_tokens = max(1, min(max_tokens, engine.n_ctx // 2))  # room for the prompt
    prompt = list(prompt)[-(engine.n_ctx - max_tokens - 1):]
    rng = np.random.default_rng(seed) if temperature > 0 else None
    try:
        logits, reused = engine.prefill(prompt, cancel)
    except Cancelled:  # superseded while reading a long prompt: nothing generated, progress kept
        return GenerationResult("", [], "cancelled", len(prompt), 0, 0.0, (time.perf_counter() - t0) * 1000, 0)
    steps0 = engine.decode_steps
    # prompt + emitted tokens, for the drafter's lookups
    seq = np.empty(len(prompt) + max_tokens + 1, dtype=np.int32)
    seq[: len(prompt)] = prompt
    n = len(prompt)
    out = _Output(engine.token_bytes, stop, max_tokens, on_text)
    res = GenerationResult("", [], "", len(prompt), reused, 0.0, 0.0, 0)
    if drafter is not None:
        drafter.begin(extra_sources)
    pending = _pick(logits, temperature, rng)  # the target's next token, not yet in the KV cache
    res.ttft_ms = (time.perf_counter() - t0) * 1000
    if trace:
        res.trace.append({"token": pending, "argmax": int(np.argmax(logits)), "gap": _top2_gap(logits), "step": 0})
    while out.emit(pending, engine.is_eog(pending)):
        seq[n] = pending
        n += 1
        if cancel is not None and cancel.is_set():
            out.reason = "cancelled"
            break
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            out.reason = "budget"
            break
        room = engine.n_ctx - len(engine.cached) - 1
        if room < 1:
            out.reason = "max_tokens"
            break
        k_cap = min(max_tokens - len(out.tokens) - 1, room - 1, max_draft)
        draft = drafter.propose(seq[:n], k_cap, costs) if drafter is not None and k_cap > 0 else None
        proposal = draft.tokens if draft is not None else []
        t_step = time.perf_counter()
        rows = engine.eval([pending, *proposal], want_rows=range(len(proposal) + 1))
        if costs is not None:
            costs.observe(len(proposal) + 1, (time.perf_counter() - t_step) * 1000)
        step = engine.decode_steps - steps0
        accepted = 0
        pending = _pick(rows[0], temperature, rng)
        alive = True
        for i, d in enumerate(proposal):
            if trace:
                res.trace.append({"token": pending, "argmax": int(np.argmax(rows[i])),
                                  "gap": _top2_gap(rows[i]), "step": step})
            if pending != d:
                break
            accepted += 1
            alive = out.emit(d, engine.is_eog(d))
            if not alive:
                break
            seq[n] = d
            n += 1
            pending = _pick(rows[i + 1], temperature, rng)
        else:
            if trace:
                row = rows[len(proposal)]
                res.trace.append({"token": pending, "argmax": int(np.argmax(row)), "gap": _top2_gap(row),
                                  "step": step})
        if draft is not None:
            engine.truncate(len(engine.cached) - (len(proposal) - accepted))
            drafter.feedback(draft, accepted)
            res.drafted += len(proposal)
            res.accepted += accepted
            res.spec_steps += 1
        if not alive:
            break
    if drafter is not None:
        drafter.end(out.tokens)
    res.text, res.tokens, res.stop_reason = out.text, out.tokens, out.reason or "max_tokens"
    res.decode_steps = engine.decode_steps - steps0
    res.total_ms = (time.perf_counter() - t0) * 1000
    if trace:  # one entry per emitted token (the last pending token may not have been emitted)
        res.trace = res.trace[: len(res.tokens)]
    return res
