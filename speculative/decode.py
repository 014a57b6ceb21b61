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

import numpy as np

from speculative.cost_model import CostModel
from speculative.drafters import Drafter
from speculative.errors import Cancelled
from speculative.heal import Heal, PieceIndex
from speculative.output import Output

WINDOW = 0  # the engine's sequence of full prompts (engine.WINDOW; engine imports this module)


@dataclass
class GenerationResult:
    text: str  # what follows the cursor (the healed text is not part of it)
    tokens: list[int]
    stop_reason: str  # "eog" | "stop" | "max_tokens" | "budget" | "cancelled" | "confidence"
    # (the server's "word": cut at a doubted token inside a word the file's words completed)
    n_prompt: int
    n_reused: int
    ttft_ms: float
    total_ms: float
    decode_steps: int  # target llama_decode calls after the prompt
    drafted: int = 0  # draft tokens verified
    accepted: int = 0  # draft tokens accepted
    spec_steps: int = 0  # steps that verified a draft
    cpu_ms: float = 0.0  # CPU time of the generating thread, when the caller measures it
    probs: list[float] = field(default_factory=list)  # the target's probability of each emitted token
    healed: str = ""  # the text before the cursor that generation reproduced first
    short: bool = False  # answered from the short prompt (the full one was not read yet)
    trace: list[dict] = field(default_factory=list)  # per emitted token, when asked for
    alternatives: list[str] = field(default_factory=list)  # other candidates, when asked for

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
        if self.temperature <= 0:
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


def generate(engine, prompt: Sequence[int], *, max_tokens: int = 64, stop: Sequence[str] = (),
             budget_s: float | None = None, cancel: threading.Event | None = None,
             on_text: Callable[[str], None] | None = None, drafter: Drafter | None = None,
             costs: CostModel | None = None, temperature: float = 0.0, seed: int = 0,
             extra_sources: Sequence[Sequence[int]] = (), max_draft: int = 31, trace: bool = False,
             heal: Heal | None = None, min_confidence: float = 0.0, index: PieceIndex | None = None,
             seq: int = WINDOW) -> GenerationResult:
    """Generate from `prompt` on `engine`'s sequence `seq`; with a drafter, verify its drafts in
    batches. With `heal`, the output first reproduces its text (not part of `text`). With
    `index` (or heal's), a doubted token is cut to the part of it the model is sure of."""
    if drafter is not None and costs is None:
        raise ValueError("speculation needs a cost model (speculative.cost_model.load_cost_model)")
    t0 = time.perf_counter()
    max_tokens = clamp_max_tokens(max_tokens, engine.n_ctx)
    prompt = list(prompt)[-(engine.n_ctx - max_tokens - 1):]
    try:
        logits, reused = engine.prefill(prompt, cancel, seq)
    except Cancelled:  # superseded while reading a long prompt: nothing generated, progress kept
        return GenerationResult("", [], "cancelled", len(prompt), 0, 0.0, (time.perf_counter() - t0) * 1000, 0)
    steps0 = engine.decode_steps
    healed = heal.rest if heal is not None else b""
    seq_tokens = np.empty(len(prompt) + len(healed) + max_tokens + 1, dtype=np.int32)  # prompt + output
    seq_tokens[: len(prompt)] = prompt
    n = len(prompt)
    out = Output(engine.token_bytes, stop, max_tokens, on_text, skip=len(healed), min_confidence=min_confidence)
    picker = Picker(temperature, seed, heal, with_probs=trace, min_confidence=min_confidence,
                    index=index or (heal.index if heal is not None else None), token_bytes=engine.token_bytes)
    res = GenerationResult("", [], "", len(prompt), reused, 0.0, 0.0, 0, healed=healed.decode("utf-8", "replace"))
    if drafter is not None:
        drafter.begin(extra_sources)

    def emit(tok: int, prob: float, sure: int) -> bool:
        nonlocal n
        before = len(out.tokens)
        alive = out.emit(tok, engine.is_eog(tok), prob, sure)
        if len(out.tokens) > before:
            seq_tokens[n] = tok
            n += 1
        return alive

    pending: Pick | None = picker.pick(logits)  # the next token, not yet in the KV cache
    res.ttft_ms = (time.perf_counter() - t0) * 1000
    if trace:
        res.trace.append({"token": pending[0], "argmax": int(np.argmax(logits)), "gap": _top2_gap(logits), "step": 0})
    while pending is not None and emit(*pending):
        if cancel is not None and cancel.is_set():
            out.reason = "cancelled"
            break
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            out.reason = "budget"
            break
        depth = len(engine.held(seq))
        room = engine.n_ctx - depth - 1
        if room < 1:
            out.reason = "max_tokens"
            break
        k_cap = min(out.room() - 1, room - 1, max_draft)
        draft = drafter.propose(seq_tokens[:n], k_cap, costs) if drafter is not None and k_cap > 0 else None
        proposal = draft.tokens if draft is not None else []
        t_step = time.perf_counter()
        rows = engine.eval([pending[0], *proposal], want_rows=range(len(proposal) + 1), seq=seq)
        if costs is not None:
            costs.observe(len(proposal) + 1, (time.perf_counter() - t_step) * 1000, depth)
        if trace:
            step = engine.decode_steps - steps0
            res.trace += [{"token": -1, "argmax": int(np.argmax(r)), "gap": _top2_gap(r), "step": step} for r in rows]
        accepted, pending = verify(rows, proposal, picker, emit)
        if trace:  # rows after the first rejection were never emitted from
            del res.trace[len(res.trace) - len(rows) + accepted + 1:]
        if draft is not None:
            engine.truncate(len(engine.held(seq)) - (len(proposal) - accepted), seq)
            drafter.feedback(draft, accepted)
            res.drafted += len(proposal)
            res.accepted += accepted
            res.spec_steps += 1
    if drafter is not None:
        drafter.end(out.tokens)
    res.text, res.tokens, res.probs, res.stop_reason = out.text, out.tokens, out.probs, out.reason or "max_tokens"
    res.decode_steps = engine.decode_steps - steps0
    res.total_ms = (time.perf_counter() - t0) * 1000
    if trace:  # one entry per emitted token (the last pending token may not have been emitted)
        for entry, tok in zip(res.trace, res.tokens, strict=False):
            entry["token"] = tok
        res.trace = res.trace[: len(res.tokens)]
    return res
