"""The decode loop: greedy (or sampled) generation with optional speculative drafts.

Each step feeds [last, d1..dk] to the target in one llama_decode with a logits row for each,
so row i is the target's own distribution after d1..di. Greedy acceptance keeps d(i+1) while
it equals the target's choice from row i; the first mismatch is replaced by that choice, so
the output is exactly what plain greedy decoding gives. With temperature > 0 the token of
row i is sampled and the draft kept while the sample matches it, which keeps the target's
distribution. Rejected drafts leave the KV cache with llama_memory_seq_rm.
k = 0 (no draft) is plain decoding, one token a step.

Token healing (heal.py) constrains the first choices to reproduce the text the prompt was
backed up over; drafts are verified against the constrained choice, so healed speculative
output equals healed plain output. Each emitted token keeps the target's probability of it
(renormalized over the allowed tokens while constrained): generation stops where it falls
below `min_confidence`, before that token.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from speculative.cost_model import CostModel
from speculative.drafters import Drafter
from speculative.errors import Cancelled
from speculative.heal import Heal, PieceIndex
from speculative.kept import Replay
from speculative.output import Output
from speculative.seqs import FULL


class Context(Protocol):
    """What the loop needs of a llama.cpp context (`speculative.engine.Engine`)."""

    n_ctx: int
    decode_steps: int

    def prefill(self, prompt: Sequence[int], cancel: threading.Event | None = None, seq: int = FULL,
                keep_after: bool = False) -> tuple[np.ndarray, int]: ...

    def eval(self, tokens: Sequence[int], want_rows: Sequence[int] = (), *, seq: int = FULL) -> list[np.ndarray]: ...

    def held(self, seq: int) -> list[int]: ...

    def truncate(self, n_keep: int, seq: int = FULL) -> None: ...

    def after(self, seq: int = FULL) -> tuple[list[int], list[np.ndarray]]: ...

    def keep(self, tokens: Sequence[int], rows: Sequence[np.ndarray], seq: int = FULL) -> None: ...

    def token_bytes(self, token: int) -> bytes: ...

    def is_eog(self, token: int) -> bool: ...


@dataclass
class GenerationResult:
    text: str  # what follows the cursor (the healed text is not part of it)
    tokens: list[int]
    stop_reason: str  # "eog" | "stop" | "max_tokens" | "budget" | "cancelled" | "confidence"
    n_prompt: int
    n_reused: int
    ttft_ms: float
    total_ms: float
    decode_steps: int  # target llama_decode calls after the prompt
    drafted: int = 0  # draft tokens verified
    accepted: int = 0  # draft tokens accepted
    spec_steps: int = 0  # steps that verified a draft
    probs: list[float] = field(default_factory=list)  # the target's probability of each emitted token
    healed: str = ""  # the text before the cursor that generation reproduced first
    replayed: int = 0  # tokens read from the rows the last generation from this prompt kept
    trace: list[dict] = field(default_factory=list)  # per emitted token, when asked for

    @property
    def tok_s(self) -> float:
        decode_s = (self.total_ms - self.ttft_ms) / 1000
        return (len(self.tokens) - 1) / decode_s if decode_s > 0 and len(self.tokens) > 1 else 0.0


def clamp_max_tokens(max_tokens: int, n_ctx: int) -> int:
    """A suggestion never takes more than half the context: the rest is the prompt's."""
    return max(1, min(max_tokens, n_ctx // 2))


Pick = tuple[int, float, int]  # token, its probability, how many of its bytes the model is sure of


class Picker:
    """The target's choice from a logits row, under the healing constraint while it lasts,
    and its probability (only computed when someone reads it).

    When that probability is below `min_confidence`, the pick also says how many leading bytes
    of the token the model is sure of: BPE spreads one text over several tokens (` '`, ` '/`,
    ` '/'`; `collect`, `collection`), so a text can be likely while no single token of it is.
    The bytes are the longest prefix of the chosen token whose tokens together reach
    `min_confidence`; -1 when the token itself does."""

    def __init__(self, temperature: float, seed: int, heal: Heal | None, with_probs: bool,
                 index: PieceIndex | None = None, token_bytes: Callable[[int], bytes] | None = None,
                 min_confidence: float = 0.0) -> None:
        self.temperature = temperature
        self.rng = np.random.default_rng(seed) if temperature > 0 else None
        self.heal = heal
        self.with_probs = with_probs or min_confidence > 0
        self.index, self.token_bytes, self.min_confidence = index, token_bytes, min_confidence

    def pick(self, row: np.ndarray) -> Pick:
        allowed = self.heal.allowed() if self.heal is not None else None
        scores = row if allowed is None else row[allowed]
        if self.rng is None:  # greedy
            i = int(np.argmax(scores))
        else:
            z = (scores - scores.max()) / self.temperature
            p = np.exp(z, dtype=np.float64)
            i = int(self.rng.choice(scores.size, p=p / p.sum()))
        tok = i if allowed is None else int(allowed[i])
        prob, sure = 1.0, -1
        if self.with_probs:  # softmax at the chosen index, over what was allowed
            total = float(np.exp(scores - scores[i], dtype=np.float64).sum())
            prob = 1.0 / total
            if prob < self.min_confidence:
                sure = self._sure_bytes(row, tok, total)
        if self.heal is not None:
            self.heal.advance(tok)
        return tok, prob, sure

    def _sure_bytes(self, row: np.ndarray, tok: int, total: float) -> int:
        """The longest prefix of `tok`'s bytes, past the text still to reproduce, whose tokens
        together reach min_confidence (every token starting with it is allowed, so `total`
        normalizes them as it did `tok`); 0 when there is none."""
        if self.index is None or self.token_bytes is None:
            return 0
        piece = self.token_bytes(tok)
        fixed = len(self.heal.rest) if self.heal is not None else 0
        for n in range(len(piece) - 1, fixed, -1):
            ids = self.index.starting(piece[:n])
            if float(np.exp(row[ids] - row[tok], dtype=np.float64).sum()) / total >= self.min_confidence:
                return n
        return 0


def _top2_gap(row: np.ndarray) -> float:
    a, b = np.partition(row, -2)[-2:]
    return float(abs(b - a))


def verify(rows: Sequence[np.ndarray], proposal: Sequence[int], picker: Picker,
           emit: Callable[[int, float, int], bool]) -> tuple[int, Pick | None]:
    """Accept drafted tokens while each is the target's own choice; (accepted, next pending).

    rows[i] is the target's distribution after proposal[:i]; the target's choice from it is
    compared with proposal[i]. On the first mismatch the target's choice is the next token:
    the output is the target's, token for token. None as pending: emitting said stop.
    """
    pending = picker.pick(rows[0])
    for i, d in enumerate(proposal):
        if pending[0] != d:
            return i, pending
        if not emit(*pending):
            return i + 1, None
        pending = picker.pick(rows[i + 1])
    return len(proposal), pending


@dataclass(frozen=True)
class Decoding:
    """How to decode: the length, stops and time allowed, sampling, the confidence cut, how
    many drafted tokens one step may verify, and the engine's sequence to decode on."""

    max_tokens: int = 64
    stop: Sequence[str] = ()
    budget_s: float | None = None
    temperature: float = 0.0
    seed: int = 0
    min_confidence: float = 0.0
    max_draft: int = 31
    seq: int = FULL


class Tracer:
    """A hook for benches: what the target chose and by what margin at every emitted token.
    This base keeps nothing; `generate` calls it at every step all the same."""

    def first(self, token: int, row: np.ndarray) -> None: ...

    def rows(self, rows: Sequence[np.ndarray], step: int) -> None: ...

    def verified(self, n_rows: int, accepted: int) -> None: ...

    def finish(self, tokens: Sequence[int]) -> list[dict]:
        return []


class TokenTrace(Tracer):
    """Per emitted token: the token, the target's argmax and top-2 gap, the step it came from."""

    def __init__(self) -> None:
        self.entries: list[dict] = []

    def first(self, token: int, row: np.ndarray) -> None:
        self.entries.append({"token": token, "argmax": int(np.argmax(row)), "gap": _top2_gap(row), "step": 0})

    def rows(self, rows: Sequence[np.ndarray], step: int) -> None:
        self.entries += [{"token": -1, "argmax": int(np.argmax(r)), "gap": _top2_gap(r), "step": step} for r in rows]

    def verified(self, n_rows: int, accepted: int) -> None:
        del self.entries[len(self.entries) - n_rows + accepted + 1:]  # rows after the first rejection: never used

    def finish(self, tokens: Sequence[int]) -> list[dict]:
        for entry, tok in zip(self.entries, tokens, strict=False):
            entry["token"] = tok
        return self.entries[: len(tokens)]  # the last pending token may not have been emitted


@dataclass
class Aids:
    """What the caller plugs into a generation: speculation (a drafter, the cost model, text
    worth copying from), token healing and the token index for the sure part of a doubted
    token, a cancel flag, a text callback (streaming) and a tracer."""

    drafter: Drafter | None = None
    costs: CostModel | None = None
    extra_sources: Sequence[Sequence[int]] = ()
    heal: Heal | None = None
    index: PieceIndex | None = None
    cancel: threading.Event | None = None
    on_text: Callable[[str], None] | None = None
    tracer: Tracer = field(default_factory=Tracer)


class _Run:
    """One generation's state: the tokens so far, the output and its stops, the picker."""

    def __init__(self, engine: Context, prompt: list[int], opts: Decoding, aids: Aids, max_tokens: int) -> None:
        self.engine, self.opts, self.aids = engine, opts, aids
        healed = aids.heal.rest if aids.heal is not None else b""
        self.tokens = np.empty(len(prompt) + len(healed) + max_tokens + 1, dtype=np.int32)  # prompt + output
        self.tokens[: len(prompt)] = prompt
        self.n = self.n_prompt = len(prompt)
        self.replay: Replay | None = Replay(*engine.after(opts.seq))  # what the last generation from this prompt left
        self.out = Output(engine.token_bytes, opts.stop, max_tokens, aids.on_text, skip=len(healed),
                          min_confidence=opts.min_confidence)
        self.picker = Picker(opts.temperature, opts.seed, aids.heal, with_probs=isinstance(aids.tracer, TokenTrace),
                             min_confidence=opts.min_confidence,
                             index=aids.index or (aids.heal.index if aids.heal is not None else None),
                             token_bytes=engine.token_bytes)
        self.healed = healed.decode("utf-8", "replace")

    def emit(self, tok: int, prob: float, sure: int) -> bool:
        before = len(self.out.tokens)
        alive = self.out.emit(tok, self.engine.is_eog(tok), prob, sure)
        if len(self.out.tokens) > before:
            self.tokens[self.n] = tok
            self.n += 1
        return alive

    def stopped(self, t0: float) -> str | None:
        """Why to stop before the next step, if anything says so."""
        if self.aids.cancel is not None and self.aids.cancel.is_set():
            return "cancelled"
        if self.opts.budget_s is not None and time.perf_counter() - t0 > self.opts.budget_s:
            return "budget"
        if self.engine.n_ctx - len(self.engine.held(self.opts.seq)) - 1 < 1:
            return "max_tokens"
        return None

    def step(self, pending: Pick, res: GenerationResult, steps0: int) -> Pick | None:
        """Feed the pending token and a draft to the target; keep what it agrees with."""
        engine, aids, seq = self.engine, self.aids, self.opts.seq
        if self.replay is not None:
            if (row := self.replay.take(pending[0])) is not None:  # held already, its row kept: no decode
                aids.tracer.rows([row], engine.decode_steps - steps0)
                res.replayed += 1
                return verify([row], [], self.picker, self.emit)[1]
            engine.truncate(self.n_prompt + self.replay.at, seq)  # the kept tokens that follow went another way
            self.replay = None
        depth = len(engine.held(seq))
        k_cap = min(self.out.room() - 1, engine.n_ctx - depth - 2, self.opts.max_draft)
        draft = None
        if aids.drafter is not None and aids.costs is not None and k_cap > 0:
            draft = aids.drafter.propose(self.tokens[: self.n], k_cap, aids.costs)
        proposal = draft.tokens if draft is not None else []
        t_step = time.perf_counter()
        rows = engine.eval([pending[0], *proposal], want_rows=range(len(proposal) + 1), seq=seq)
        if aids.costs is not None:
            aids.costs.observe(len(proposal) + 1, (time.perf_counter() - t_step) * 1000, depth)
        aids.tracer.rows(rows, engine.decode_steps - steps0)
        accepted, nxt = verify(rows, proposal, self.picker, self.emit)
        aids.tracer.verified(len(rows), accepted)
        if draft is not None and aids.drafter is not None:
            engine.truncate(len(engine.held(seq)) - (len(proposal) - accepted), seq)
            aids.drafter.feedback(draft, accepted)
            res.drafted, res.accepted, res.spec_steps = res.drafted + len(proposal), res.accepted + accepted, \
                res.spec_steps + 1
        engine.keep([pending[0], *proposal[:accepted]], rows[: accepted + 1], seq)
        return nxt


def generate(engine: Context, prompt: Sequence[int], opts: Decoding | None = None,
             aids: Aids | None = None) -> GenerationResult:
    """Generate from `prompt` on `engine`'s sequence `opts.seq`; with a drafter, verify its
    drafts in batches. With `aids.heal`, the output first reproduces its text (not part of
    `text`). With an index (or heal's), a doubted token is cut to the part the model is sure of."""
    opts, aids = opts or Decoding(), aids or Aids()
    if aids.drafter is not None and aids.costs is None:
        raise ValueError("speculation needs a cost model (speculative.cost_model.load_cost_model)")
    t0 = time.perf_counter()
    max_tokens = clamp_max_tokens(opts.max_tokens, engine.n_ctx)
    prompt = list(prompt)[-(engine.n_ctx - max_tokens - 1):]
    try:
        logits, reused = engine.prefill(prompt, aids.cancel, opts.seq, keep_after=True)
    except Cancelled:  # superseded while reading a long prompt: nothing generated, progress kept
        return GenerationResult("", [], "cancelled", len(prompt), 0, 0.0, (time.perf_counter() - t0) * 1000, 0)
    steps0 = engine.decode_steps
    run = _Run(engine, prompt, opts, aids, max_tokens)
    res = GenerationResult("", [], "", len(prompt), reused, 0.0, 0.0, 0, healed=run.healed)
    if aids.drafter is not None:
        aids.drafter.begin(aids.extra_sources, prompt=prompt, seq=opts.seq)
    first = run.picker.pick(logits)  # the next token, not yet in the KV cache
    res.ttft_ms = (time.perf_counter() - t0) * 1000
    aids.tracer.first(first[0], logits)
    pending: Pick | None = first
    while pending is not None and run.emit(*pending):
        if reason := run.stopped(t0):
            run.out.reason = reason
            break
        pending = run.step(pending, res, steps0)
    if aids.drafter is not None:
        aids.drafter.end(run.out.tokens)
    out = run.out
    res.text, res.tokens, res.probs, res.stop_reason = out.text, out.tokens, out.probs, out.reason or "max_tokens"
    res.decode_steps = engine.decode_steps - steps0
    res.total_ms = (time.perf_counter() - t0) * 1000
    res.trace = aids.tracer.finish(res.tokens)
    return res
