"""The one check for tests that compare the output of two decoding paths (docs/testing.md).

The reference is a greedy run with `trace=True`; the other run must equal it token for token,
or first leave it where the reference's top two logits are a rounding near-tie apart
(`bench.divergence`, the rule `specfill bench` counts `divergences_unexplained` by).
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.divergence import GAP_TIE, divergence, text_divergence
from speculative.decode import GenerationResult


def _gaps(reference: GenerationResult) -> list[float]:
    assert len(reference.trace) == len(reference.tokens), "the reference must be generated with trace=True"
    return [t["gap"] for t in reference.trace]


def assert_same_greedy(reference: GenerationResult, other: Sequence[int], what: str = "") -> None:
    """`other` (tokens) equals the reference's tokens, or parts from them at a near-tie."""
    assert_same_tokens(reference.tokens, _gaps(reference), other, what)


def assert_same_tokens(reference: Sequence[int], gaps: Sequence[float], other: Sequence[int], what: str = "") -> None:
    """As `assert_same_greedy`, for a reference decoded by the test itself with its gaps."""
    d = divergence(reference, gaps, other)
    assert d is None or d.near_tie, f"{what}: a real divergence, not a near-tie: {d}"


def assert_same_greedy_text(reference: GenerationResult, piece, other: bytes, what: str = "") -> None:
    """As `assert_same_greedy`, for a run known only by its text (`piece`: a token's bytes)."""
    d = text_divergence(reference.tokens, _gaps(reference), piece, other)
    assert d is None or d.near_tie, f"{what}: a real divergence, not a near-tie: {d}"


def near_ties(reference: GenerationResult) -> int:
    """How many of the reference's tokens were a near-tie: the most places another path may part."""
    return sum(g < GAP_TIE for g in _gaps(reference))
