"""How fast prompt lookup could be at best: yardsticks for the cost model's choices.

Given the target's own output, the tokens each lookup draft would have had accepted are known
after the fact. Two bounds, both in time modelled from the profiled verify costs:
- per position: an oracle that drafts exactly the right number at every step (none where a
  step would not pay); no policy with this drafter can beat it on this machine;
- per kind: the best single draft length for each kind of position a policy can tell apart
  before verifying (match length, lead over rival matches, the target's top-2 logit gap on
  the last token), chosen knowing the whole run: what a perfectly calibrated policy on these
  features could reach (optimistic: it is fitted on the very cases it is scored on).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from speculative.cost_model import CostModel
from speculative.drafters import PromptLookup
from speculative.engine import Engine

GAP_BINS = (0.0, 2.0, 5.0, 10.0)  # the target's top-2 logit gap on the last token


@dataclass(frozen=True)
class Spot:
    run: int  # draft tokens the target would accept here
    kind: str  # what a policy can see before verifying; "" = lookup found nothing


def spots(lookup: PromptLookup, prompt: Sequence[int], tokens: Sequence[int],
          gaps: Sequence[float] = ()) -> list[Spot]:
    """One Spot for each j: lookup's draft after tokens[:j + 1] against tokens[j + 1:]."""
    seq = np.asarray([*prompt, *tokens], dtype=np.int32)
    out = []
    for j in range(len(tokens)):
        cont, n, lead = lookup.find(seq[: len(prompt) + j + 1])
        ahead = tokens[j + 1:]
        a = 0
        while n and a < min(len(cont), len(ahead)) and int(cont[a]) == ahead[a]:
            a += 1
        gap = GAP_BINS[bisect.bisect_right(GAP_BINS, gaps[j]) - 1] if j < len(gaps) else 0.0
        out.append(Spot(a, f"{lookup.bucket(n, lead)}/g{gap:g}" if n else ""))
    return out


def best_ms(runs: Sequence[int], costs: CostModel, max_draft: int, draft_ms: float = 0.0) -> float:
    """Least modelled decode time: from j tokens emitted, a step verifying k of the run's
    tokens (k <= runs[j]) costs cost(k + 1), plus k draft steps of `draft_ms` for a draft
    model, and emits k + 1 tokens."""
    m = len(runs)
    if m < 2:
        return 0.0
    best = [0.0] * m  # best[j]: ms to go from tokens[:j + 1] emitted to all m
    for j in range(m - 2, -1, -1):
        top = min(runs[j], max_draft, m - 2 - j)
        best[j] = min(costs.cost(k + 1) + k * draft_ms + best[j + k + 1] for k in range(top + 1))
    return best[0]


def draft_runs(draft: Engine, prompt: Sequence[int], tokens: Sequence[int]) -> list[int]:
    """For each j, how many tokens a draft model's greedy draft after tokens[:j + 1] would
    have had accepted: the draft reads the target's output once (a row after each token) and
    its draft from j runs while its choice after each next token is the target's."""
    if len(tokens) < 2:
        return [0] * len(tokens)
    draft.prefill(list(prompt))
    rows = draft.eval(list(tokens[:-1]), want_rows=range(len(tokens) - 1))
    agree = [int(np.argmax(r)) == t for r, t in zip(rows, tokens[1:], strict=True)] + [False]
    runs = [0] * len(tokens)
    for j in range(len(tokens) - 2, -1, -1):
        runs[j] = runs[j + 1] + 1 if agree[j] else 0
    return runs


def draft_bound(runs: Sequence[Sequence[int]], costs: CostModel, max_draft: int, draft_ms: float) -> float:
    """A draft model's speedup over plain with draft lengths chosen in hindsight, in time
    modelled from the target's costs and the draft's step: no policy with this pair can beat it."""
    plain = sum(max(0, len(r) - 1) for r in runs) * costs.cost(1)
    oracle = sum(best_ms(r, costs, max_draft, draft_ms) for r in runs)
    return _at_least_plain(plain, oracle)


def _at_least_plain(plain: float, ms: float) -> float:
    """plain / ms; drafting nothing is plain, whose steps summed round unlike their product."""
    return max(1.0, plain / ms) if ms else 1.0


def policy_ms(case: Sequence[Spot], k_of: Callable[[str], int], costs: CostModel, max_draft: int) -> float:
    """Modelled decode time of a policy that drafts k_of(kind) tokens wherever lookup found one."""
    t, j, m = 0.0, 0, len(case)
    while j < m - 1:
        k = min(k_of(case[j].kind), max_draft, m - 2 - j) if case[j].kind else 0
        t += costs.cost(k + 1)
        j += min(k, case[j].run) + 1
    return t


def bounds(cases: Sequence[Sequence[Spot]], costs: CostModel, max_draft: int) -> dict[str, float]:
    """Speedups over plain, in modelled time: per position and per kind (see the module)."""
    plain = sum(max(0, len(c) - 1) for c in cases) * costs.cost(1)
    oracle = sum(best_ms([s.run for s in c], costs, max_draft) for c in cases)
    ks = {s.kind: 0 for c in cases for s in c if s.kind}

    def total() -> float:
        return sum(policy_ms(c, ks.__getitem__, costs, max_draft) for c in cases)

    for _ in range(3):  # coordinate descent: one kind's length at a time
        for kind in sorted(ks):
            scores = {}
            for k in range(max_draft + 1):
                ks[kind] = k
                scores[k] = total()
            ks[kind] = min(scores, key=lambda k: scores[k])
    per_kind = total()
    return {"per_position": _at_least_plain(plain, oracle), "per_kind": _at_least_plain(plain, per_kind)}
