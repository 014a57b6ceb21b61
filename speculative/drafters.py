"""Drafters propose tokens for the target to verify: prompt lookup, a draft model, or both.

Each drafter asks the cost model how many tokens are worth verifying, given its running
acceptance for drafts of this kind; it proposes nothing when no draft is expected to pay.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from speculative.cost_model import MAX_VERIFY, CostModel
from speculative.engine import CancelFlag
from speculative.errors import ModelError
from speculative.seqs import FULL

MAX_NGRAM = 32  # match lengths counted up to this
PROBES, PROBE_P, PROBE_TOKENS = 8, 0.9, 4  # a draft model's first steps: tried optimistically, then measured
REPROBE = 32  # steps without a draft before a draft model is tried again with one token
IN_STEP = 2  # tokens a draft model's look reads in step with the target: the pending one, the last draft's
LOOKS_JUDGED, LOOKS_DECAY = 16, 0.97  # looks before a draft model's looking is judged; their weight over time
# A draft model's acceptance is learned per band of its own probability of the token (llama.cpp
# stops drafting below one, p_min): a doubted token is mostly rejected, a sure one mostly kept.
SURE_BANDS = (0.9, 0.6, 0.3, 0.0)


@dataclass
class Draft:
    tokens: list[int]
    bucket: str  # which acceptance estimate it was chosen with
    bands: tuple[int, ...] = ()  # a draft model's: its confidence band of each token


class Drafter(Protocol):
    """What the decode loop asks of a drafter, one request at a time:
    `begin` with text worth copying from and the prompt (once the target has read it),
    `propose` before each verify step (None: do not draft), `feedback` with how many drafted
    tokens the target accepted, `end` with the output."""

    name: str

    def begin(self, extra: Sequence[Sequence[int]] = (), *, prompt: Sequence[int] = (), seq: int = FULL) -> None: ...

    def propose(self, seq: np.ndarray, k_cap: int, costs: CostModel) -> Draft | None: ...

    def feedback(self, draft: Draft, accepted: int) -> None: ...

    def end(self, completion: Sequence[int]) -> None: ...


@dataclass
class Acceptance:
    """Per-bucket running estimate of the per-token acceptance rate (geometric model).

    A step that verified k drafted tokens and accepted a of them adds a successes and,
    when a < k, one failure: the maximum-likelihood p of a geometric run length.
    """

    priors: dict[str, float]
    weight: float = 3.0
    wins: dict[str, float] = field(default_factory=dict)
    losses: dict[str, float] = field(default_factory=dict)

    def p(self, bucket: str) -> float:
        prior = self.priors.get(bucket, 0.2)
        w = self.wins.get(bucket, 0.0) + prior * self.weight
        lo = self.losses.get(bucket, 0.0) + (1 - prior) * self.weight
        return w / (w + lo)

    def update(self, bucket: str, proposed: int, accepted: int) -> None:
        self.wins[bucket] = self.wins.get(bucket, 0.0) + accepted
        self.losses[bucket] = self.losses.get(bucket, 0.0) + (1 if accepted < proposed else 0)


def longest_match(hay: np.ndarray, tail: np.ndarray, max_n: int = MAX_NGRAM) -> tuple[int, int, int]:
    """Where the longest suffix of `tail` (up to max_n tokens) last occurs in `hay` with at
    least one token after it: (index of the token after the match, match length, rival),
    or (-1, 0, 0). Latest occurrence wins among equally long matches. `rival` is the longest
    match that would continue differently: a long match with no close rival is a safe bet."""
    if len(tail) == 0 or len(hay) < 2:
        return -1, 0, 0
    cand = np.flatnonzero(hay[:-1] == tail[-1])
    if cand.size == 0:
        return -1, 0, 0
    length = np.ones(cand.size, dtype=np.int32)
    alive = np.ones(cand.size, dtype=bool)
    for back in range(1, min(max_n, len(tail))):
        idx = cand - back
        ok = alive & (idx >= 0)
        ok[ok] = hay[idx[ok]] == tail[-1 - back]
        alive = ok
        if not alive.any():
            break
        length += alive
    best = int(length.max())
    j = int(np.flatnonzero(length == best)[-1])
    at = int(cand[j]) + 1
    differs = hay[cand + 1] != hay[at]
    rival = int(length[differs].max()) if differs.any() else 0
    return at, best, rival


@dataclass
class RunLengths:
    """How far proposed continuations turned out right, per bucket and draft position.

    at_risk[i] counts proposals whose first i tokens were right and whose token i+1 was seen;
    kept[i] those whose token i+1 was right as well, so kept[i] / at_risk[i] is the chance that
    draft token i+1 is accepted given the ones before it were. Unlike one rate per bucket this
    knows that copied regions end: a 30-token match is often right for 8 tokens, not for 31.
    """

    priors: dict[str, float]
    weight: float = 2.0
    at_risk: dict[str, np.ndarray] = field(default_factory=dict)
    kept: dict[str, np.ndarray] = field(default_factory=dict)

    def _arrays(self, bucket: str) -> tuple[np.ndarray, np.ndarray]:
        if bucket not in self.at_risk:
            self.at_risk[bucket] = np.zeros(MAX_VERIFY, dtype=np.float64)
            self.kept[bucket] = np.zeros(MAX_VERIFY, dtype=np.float64)
        return self.at_risk[bucket], self.kept[bucket]

    def ps(self, bucket: str, k: int) -> list[float]:
        at_risk, kept = self._arrays(bucket)
        prior = self.priors.get(bucket, 0.2)
        return list((kept[:k] + prior * self.weight) / (at_risk[:k] + self.weight))

    def observe(self, bucket: str, position: int, right: bool) -> None:
        at_risk, kept = self._arrays(bucket)
        at_risk[position] += 1
        kept[position] += right


@dataclass
class _Open:
    """A continuation proposed (drafted or not) at seq position `start`, being scored."""

    start: int
    cont: np.ndarray
    bucket: str
    next: int = 0  # how many of its tokens were right so far


class PromptLookup:
    """N-gram lookup over the text so far, the suffix, other documents and recent completions.

    Its acceptance is scored on every emitted token, drafted or not: each continuation it
    finds is compared with what the target then produced, as a run length per kind of match
    (length, and lead over the best rival that continues differently). So it keeps learning
    even while nothing is drafted.
    """

    name = "lookup"
    BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)  # match length -> bucket (lower bound)
    # Lead over the best rival match that continues differently: measured on real code, a
    # 2-token match with no lead is accepted 39% of the time, with a lead of 1-2 tokens 75%.
    LEADS = (0, 1, 3)
    PRIORS = {1: 0.1, 2: 0.2, 3: 0.3, 4: 0.4, 6: 0.5, 8: 0.55, 12: 0.6, 16: 0.65, 24: 0.7, 32: 0.75}
    MAX_OPEN = 64

    def __init__(self, max_recent: int = 16) -> None:
        self.runs = RunLengths({self.bucket(b, lead): p for b, p in self.PRIORS.items() for lead in self.LEADS})
        self.sources: list[np.ndarray] = []
        self.recent: deque[np.ndarray] = deque(maxlen=max_recent)
        self._open: deque[_Open] = deque(maxlen=self.MAX_OPEN)
        self.scored = 0  # positions scored, ever

    def begin(self, extra: Sequence[Sequence[int]] = (), *, prompt: Sequence[int] = (), seq: int = FULL) -> None:
        """Start a request; `extra` holds token lists worth copying from (suffix, other files)."""
        self.sources = [np.asarray(s, dtype=np.int32) for s in extra if len(s) > 1]
        self._open.clear()

    def end(self, completion: Sequence[int]) -> None:
        if len(completion) > 1:
            self.recent.append(np.asarray(completion, dtype=np.int32))
        self._open.clear()  # what was not seen yet stays unscored (censored), not counted wrong

    @classmethod
    def bucket(cls, n: int, lead: int) -> str:
        """The kind of a match, as acceptance is learned and looked up: its length and its lead, bucketed."""
        nb = cls.BUCKETS[bisect.bisect_right(cls.BUCKETS, n) - 1]
        lb = cls.LEADS[bisect.bisect_right(cls.LEADS, lead) - 1]
        return f"n{nb}+{lb}"

    def find(self, seq: np.ndarray) -> tuple[np.ndarray, int, int]:
        """The continuation after the best match of the tail of `seq`, the match length, and
        its lead over the longest match (in any source) that continues differently."""
        tail = seq[-MAX_NGRAM:]
        found = []
        for hay in (seq, *self.sources, *reversed(self.recent)):
            at, n, rival = longest_match(hay, tail)
            if n:
                found.append((hay[at:at + MAX_VERIFY - 1], n, rival))
        if not found:
            return np.empty(0, dtype=np.int32), 0, 0
        best = max(range(len(found)), key=lambda i: (found[i][1], -i))  # ties: the text itself first
        cont, n, rival = found[best]
        for other, m, _ in found:
            if other[0] != cont[0]:
                rival = max(rival, m)
        return cont, n, n - rival

    def _score(self, seq: np.ndarray) -> None:
        """Score open continuations against the tokens emitted since they were found."""
        still = []
        for o in self._open:
            while o.next < o.cont.size and o.start + o.next < len(seq):
                right = int(o.cont[o.next]) == int(seq[o.start + o.next])
                self.runs.observe(o.bucket, o.next, right)
                self.scored += 1
                if not right:
                    break
                o.next += 1
            else:
                if o.next < o.cont.size:
                    still.append(o)  # waiting for more tokens
        self._open = deque(still, maxlen=self.MAX_OPEN)

    def propose(self, seq: np.ndarray, k_cap: int, costs: CostModel) -> Draft | None:
        self._score(seq)
        cont, n, lead = self.find(seq)
        if n == 0:
            return None
        bucket = self.bucket(n, lead)
        self._open.append(_Open(len(seq), cont, bucket))
        ps = self.runs.ps(bucket, min(k_cap, cont.size))
        k = costs.choose(ps, depth=len(seq))
        return Draft([int(t) for t in cont[:k]], bucket) if k else None

    def feedback(self, draft: Draft, accepted: int) -> None:
        pass  # scored token by token in _score, drafted or not


@dataclass
class Looks:
    """What the steps where a draft model looked ahead have yielded: tokens emitted, and ms (its
    own time, measured, and the verify's, modelled), decayed to follow the text. Looking costs a
    draft step even where the draft then doubts its token and drafts nothing, which no price of
    a drafted token shows: a draft that looks in vain more than it gains stops looking."""

    tokens: float = 0.0
    ms: float = 0.0
    n: int = 0

    def add(self, tokens: int, ms: float) -> None:
        self.tokens, self.ms, self.n = LOOKS_DECAY * self.tokens + tokens, LOOKS_DECAY * self.ms + ms, self.n + 1

    def pay(self, plain_ms: float) -> bool:
        """Whether looking has yielded tokens at least as fast as plain steps (`plain_ms` a token)."""
        return self.n < LOOKS_JUDGED or self.tokens * plain_ms >= self.ms


def _band(logits: np.ndarray, tok: int) -> int:
    """Which band of SURE_BANDS the draft's own probability of `tok` falls in."""
    prob = 1.0 / float(np.exp(logits - logits[tok], dtype=np.float64).sum())
    return next(i for i, lo in enumerate(SURE_BANDS) if prob >= lo)


def check_same_vocab(target, draft) -> None:
    """A draft model must share the target's vocabulary token for token; else a clear error."""
    problems = []
    if target.n_vocab != draft.n_vocab:
        problems.append(f"{draft.n_vocab} tokens vs the target's {target.n_vocab}")
    else:
        for name in ("bos", "eos", "eot"):
            a, b = target.special_ids().get(name), draft.special_ids().get(name)
            if a != b:
                problems.append(f"{name} token {b} vs the target's {a}")
        step = max(1, target.n_vocab // 2000)
        ids = list(range(0, min(512, target.n_vocab))) + list(range(0, target.n_vocab, step))
        bad = [i for i in ids if target.token_bytes(i) != draft.token_bytes(i)]
        if bad:
            problems.append(f"{len(bad)} of {len(ids)} sampled tokens spelled differently (e.g. id {bad[0]})")
    if problems:
        raise ModelError(f"draft model {draft.path} has another vocabulary than {target.path.name}: "
                         + "; ".join(problems))


class DraftModel:
    """A second, smaller GGUF drafting greedily in its own context, with KV prefix reuse."""

    name = "draft"

    def __init__(self, engine, target, draft_costs: CostModel, source: str | None = None) -> None:
        check_same_vocab(target, engine)
        self.engine, self.costs = engine, draft_costs  # its own costs: what a step and a read take
        # priors: a draft about as right as it is sure
        self.acceptance = Acceptance({f"model/{i}": max(0.2, lo) for i, lo in enumerate(SURE_BANDS)})
        self.ms_per_token = draft_costs.cost(1)  # one draft step, refined as drafts are timed
        self.prompt_ms = 0.0  # reading the prompts into its own context, ever
        self.drafts = self.drafted = self.accepted = 0
        self.source = source or str(engine.path)  # the file the user named, when the engine loads a converted copy
        self.seq = FULL  # the target's sequence it drafts for (begin)
        self.idle = 0  # steps since it last drafted
        self.looks = Looks()
        self._step_ms = 0.0  # the last draft's step: its own time and its verify's, modelled

    def begin(self, extra: Sequence[Sequence[int]] = (), *, prompt: Sequence[int] = (), seq: int = FULL) -> None:
        """Read the prompt now, from what its context holds: a draft step then costs one token
        read, and the draft's step time is not mistaken for the prompt's. It drafts on the
        target's sequence number, so a short prompt does not evict the full one it holds."""
        self.seq = seq
        if prompt and len(prompt) < self.engine.n_ctx:
            t0 = time.perf_counter()
            self.engine.make_room(seq, len(prompt))
            self.engine.prefill(list(prompt), seq=seq)
            self.prompt_ms += (time.perf_counter() - t0) * 1000

    def read(self, prompt: Sequence[int], cancel: CancelFlag, chunk: int) -> None:
        """Read the target's pending full prompt while idle, making room as `begin` does: the
        short prompts it drafted on share the context's cells."""
        self.engine.make_room(FULL, len(prompt))
        self.engine.read(prompt, cancel, FULL, chunk=chunk)

    def end(self, completion: Sequence[int]) -> None:
        pass

    def propose(self, seq: np.ndarray, k_cap: int, costs: CostModel) -> Draft | None:
        probing = self.drafts < PROBES
        if probing:  # a draft never tried would never be measured: a few tokens, priced hopefully
            k_cap = min(k_cap, PROBE_TOKENS)
        best = max(self._p(band, probing) for band in range(len(SURE_BANDS)))  # its acceptance where it is surest
        plain_ms = costs.cost(1, len(seq))
        # Priced with reading what the target emitted since it last looked (prompt lookup's
        # tokens, steps it sat out): after many, a look costs more than it can gain.
        tokens = seq.tolist()
        catch_up = self._catch_up_ms(tokens)
        trying = not costs.choose([best] * k_cap, self.ms_per_token, len(seq), catch_up) \
            or not self.looks.pay(plain_ms)
        if trying:
            # Nor would a draft that stopped after a bad start: one token now and then keeps
            # its acceptance current, while a draft that good would pay at all (mostly at a
            # generation's start, where its context holds the prompt).
            self.idle += 1
            if self.idle < REPROBE or not costs.choose([PROBE_P], self.ms_per_token, len(seq), catch_up):
                return None
            k_cap = 1
        self.idle = 0
        k_cap = min(k_cap, self.engine.n_ctx - len(seq) - 1)
        if k_cap < 1:
            return None
        t0 = time.perf_counter()
        self.engine.make_room(self.seq, len(seq) + k_cap)
        logits, reused = self.engine.prefill(tokens, seq=self.seq)
        out, bands, ps = self._draft(logits, k_cap, costs, best, probing, len(seq))
        if len(seq) - reused <= IN_STEP:  # in step: the pending token (and the last draft's) read, then its steps
            ms = (time.perf_counter() - t0) * 1000 / max(1, len(out))
            self.ms_per_token = 0.8 * self.ms_per_token + 0.2 * ms
        k = len(out) if trying else costs.choose(ps, self.ms_per_token, depth=len(seq))
        looked_ms = (time.perf_counter() - t0) * 1000
        if not k:  # it looked, doubted, and the step is a plain one all the same
            self.looks.add(1, looked_ms + plain_ms)
            return None
        self._step_ms = looked_ms + costs.cost(k + 1, len(seq))
        return Draft(out[:k], "model", tuple(bands[:k]))

    def _catch_up_ms(self, tokens: list[int]) -> float:
        """What reading the `tokens` its context lacks would take it, beyond the IN_STEP a
        look reads anyway (counted in its ms_per_token)."""
        held = self.engine.common_prefix(tokens, self.seq)
        return self.costs.read.ms(held, max(0, len(tokens) - held - IN_STEP))

    def _draft(self, logits: np.ndarray, k_cap: int, costs: CostModel, best: float, probing: bool,
               depth: int) -> tuple[list[int], list[int], list[float]]:
        """Draft greedily, each token with the acceptance of its band of the draft's own
        confidence, while going on could still pay: tokens after one it doubts are worth
        little, as the target mostly rejects a doubted token."""
        out: list[int] = []
        bands: list[int] = []
        ps: list[float] = []
        while True:
            tok = int(np.argmax(logits))
            band = _band(logits, tok)
            out.append(tok)
            bands.append(band)
            ps.append(self._p(band, probing))
            hoped = costs.choose(ps + [best] * (k_cap - len(ps)), self.ms_per_token, depth=depth)
            if len(out) >= k_cap or hoped <= len(out):
                return out, bands, ps
            (logits,) = self.engine.eval([tok], want_rows=[0], seq=self.seq)

    def _p(self, band: int, probing: bool) -> float:
        p = self.acceptance.p(f"model/{band}")
        return max(p, PROBE_P) if probing else p

    def feedback(self, draft: Draft, accepted: int) -> None:
        """Each drafted token up to the first rejected one tells its band's acceptance."""
        for i, band in enumerate(draft.bands[: accepted + 1]):
            self.acceptance.update(f"model/{band}", 1, int(i < accepted))
        self.looks.add(accepted + 1, self._step_ms)
        self.drafts, self.drafted, self.accepted = self.drafts + 1, self.drafted + len(draft.tokens), \
            self.accepted + accepted

    def stats(self, costs: CostModel) -> dict:
        """Its acceptance, step cost and the speed-up its drafts bring by the target's cost table
        (tokens a verify step yields over what they cost, against one plain step a token)."""
        k = self.drafted / self.drafts if self.drafts else 0.0
        yielded = 1 + self.accepted / self.drafts if self.drafts else 1.0
        step_ms = costs.cost(round(k) + 1) + k * self.ms_per_token
        return {"model": self.source, "drafts": self.drafts, "drafted": self.drafted,
                "accepted": self.accepted, "acceptance": self.accepted / self.drafted if self.drafted else None,
                "ms_per_token": round(self.ms_per_token, 2), "prompt_ms": round(self.prompt_ms),
                "speedup": round(yielded * costs.cost(1) / step_ms, 2) if self.drafts else None}


class Auto:
    """Prompt lookup first; the draft model only when lookup has nothing worth verifying."""

    name = "auto"

    def __init__(self, lookup: PromptLookup, model: DraftModel | None) -> None:
        self.lookup, self.model = lookup, model

    def begin(self, extra: Sequence[Sequence[int]] = (), *, prompt: Sequence[int] = (), seq: int = FULL) -> None:
        self.lookup.begin(extra)
        if self.model is not None:
            self.model.begin(prompt=prompt, seq=seq)

    def end(self, completion: Sequence[int]) -> None:
        self.lookup.end(completion)

    def propose(self, seq: np.ndarray, k_cap: int, costs: CostModel) -> Draft | None:
        for drafter in (self.lookup, self.model):
            if drafter is not None and (draft := drafter.propose(seq, k_cap, costs)) is not None:
                return draft
        return None

    def feedback(self, draft: Draft, accepted: int) -> None:
        drafter = self.model if draft.bucket == "model" else self.lookup
        if drafter is not None:
            drafter.feedback(draft, accepted)
