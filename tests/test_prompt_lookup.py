"""Prompt lookup: the latest longest match, every source, and acceptance learned per match length."""

import numpy as np

from speculative.cost_model import CostModel
from speculative.drafters import PromptLookup, longest_match

A = np.array


def test_longest_match_prefers_length_then_the_latest():
    hay = A([1, 2, 3, 9, 7, 2, 3, 8, 5, 1, 2, 3], dtype=np.int32)
    # the tail 1,2,3 stands at 0..2: continue with 9; the rival 2,3 (at 5..6) goes on with 8
    assert longest_match(hay, hay) == (3, 3, 2)
    # latest of two equally long matches; both continue differently, so the rival is as long
    assert longest_match(A([5, 2, 3, 4, 2, 3, 6], dtype=np.int32), A([2, 3], dtype=np.int32)) == (6, 2, 2)
    # the same continuation is no rival
    assert longest_match(A([2, 3, 4, 2, 3, 4, 2, 3], dtype=np.int32), A([2, 3], dtype=np.int32)) == (5, 2, 0)


def test_longest_match_needs_a_continuation_and_a_match():
    assert longest_match(A([1, 2, 3], dtype=np.int32), A([3], dtype=np.int32)) == (-1, 0, 0)
    assert longest_match(A([1, 2, 3], dtype=np.int32), A([7], dtype=np.int32)) == (-1, 0, 0)
    assert longest_match(A([], dtype=np.int32), A([7], dtype=np.int32)) == (-1, 0, 0)


def test_lookup_searches_the_suffix_and_recent_completions():
    lookup = PromptLookup()
    seq = A([10, 11, 12, 40, 41], dtype=np.int32)
    lookup.begin([[40, 41, 42, 43, 44]])
    cont, n, lead = lookup.find(seq)
    assert n == 2 and lead == 2 and list(cont[:3]) == [42, 43, 44]
    lookup.end([50, 51, 52, 53])
    lookup.begin([])
    cont, n, _ = lookup.find(A([1, 50, 51], dtype=np.int32))
    assert n == 2 and list(cont) == [52, 53]


def test_acceptance_is_learned_per_match_length_even_when_nothing_is_drafted():
    lookup = PromptLookup()
    never = CostModel({1: 1.0, 32: 1000.0})  # drafting never pays: only shadow scoring runs
    pattern = list(range(100, 120))
    seq = np.array(pattern * 3, dtype=np.int32)
    lookup.begin([])
    prior = lookup.runs.ps("n16+3", 4)
    for n in range(41, len(seq)):
        assert lookup.propose(seq[:n], 8, never) is None
    learned = lookup.runs.ps("n16+3", 4)
    assert all(a > b for a, b in zip(learned, prior, strict=True))  # the repeats were predicted right
    assert lookup.scored > 0


def test_run_lengths_learn_where_copied_regions_end():
    lookup = PromptLookup()
    never = CostModel({1: 1.0, 32: 1000.0})
    # a 12-token block repeated with a different token after its 4th token each time
    block = list(range(200, 212))
    seq = []
    for r in range(12):
        seq += block[:4] + [300 + r] + block[5:]
    seq = np.array(seq, dtype=np.int32)
    lookup.begin([])
    for n in range(24, len(seq)):
        lookup.propose(seq[:n], 8, never)
    for bucket in lookup.runs.at_risk:
        at_risk, kept = lookup.runs.at_risk[bucket], lookup.runs.kept[bucket]
        assert (kept <= at_risk).all()
    ps = {b: lookup.runs.ps(b, 8) for b in lookup.runs.at_risk if lookup.runs.at_risk[b].sum() > 5}
    assert ps and any(min(p) < 0.5 < max(p) for p in ps.values())  # sure at first, not past the change


def test_lookup_proposes_once_confident_and_cost_model_allows():
    lookup = PromptLookup()
    free = CostModel({1: 10.0, 32: 10.0})  # verifying more rows costs nothing extra
    seq = np.array(list(range(100, 140)) * 2, dtype=np.int32)
    lookup.begin([])
    draft = lookup.propose(seq[:70], 8, free)
    assert draft is not None and draft.tokens == list(range(130, 138))
