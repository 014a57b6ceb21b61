"""How fast prompt lookup could be at best: the yardstick for the cost model's choices.

Given the target's own output, the tokens each lookup draft would have had accepted are known
after the fact. An oracle that drafts exactly the right number at every step (none where a
step would not pay) decodes in the least time the profiled verify costs allow; no policy for
choosing draft lengths can beat it with this drafter on this machine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from speculative.cost_model import CostModel
from speculative.drafters import PromptLookup


def accepted_runs(lookup: PromptLookup, prompt: Sequence[int], tokens: Sequence[int]) -> list[int]:
    """For each j: how many tokens of lookup's draft after tokens[:j + 1] equal tokens[j + 1:]."""
    seq = np.asarray([*prompt, *tokens], dtype=np.int32)
    runs = []
    for j in range(len(tokens)):
        cont, n, _ = lookup.find(seq[: len(prompt) + j + 1])
        ahead = tokens[j + 1:]
        a = 0
        while n and a < min(len(cont), len(ahead)) and int(cont[a]) == ahead[a]:
            a += 1
        runs.append(a)
    return runs


def best_ms(runs: Sequence[int], costs: CostModel, max_draft: int) -> float:
    """Least modelled decode time: from j tokens emitted, a step verifying k of the run's
    tokens (k <= runs[j]) costs cost(k + 1) and emits k + 1 tokens."""
    m = len(runs)
    if m < 2:
        return 0.0
    best = [0.0] * m  # best[j]: ms to go from tokens[:j + 1] emitted to all m
    for j in range(m - 2, -1, -1):
        top = min(runs[j], max_draft, m - 2 - j)
        best[j] = min(costs.cost(k + 1) + best[j + k + 1] for k in range(top + 1))
    return best[0]


def lookup_bound(cases: Sequence[tuple[Sequence[int], Sequence[int], Sequence[Sequence[int]]]],
                 costs: CostModel, max_draft: int) -> float:
    """Speedup over plain, in modelled time, of the oracle over (prompt, plain tokens, extra
    sources) cases; lookup remembers earlier outputs as the bench's lookup does."""
    lookup = PromptLookup()
    plain = oracle = 0.0
    for prompt, tokens, extra in cases:
        lookup.begin(extra)
        plain += max(0, len(tokens) - 1) * costs.cost(1)
        oracle += best_ms(accepted_runs(lookup, prompt, tokens), costs, max_draft)
        lookup.end(tokens)
    return plain / oracle if oracle else 1.0
