"""Whether two greedy decodings of one prompt differ only where rounding may decide.

Two paths to the same greedy text (a verify batch against single steps, branches batched
side by side against cold runs, fewer threads against more, a warm cache against a cold read)
round the logits differently on some CPUs. Where the reference run's top two logits are
closer than `GAP_TIE`, either token is the model's choice and the paths may part there; past
that point their texts are about different contexts and are not compared. Anywhere else a
difference is a real divergence. `specfill bench` and the tests use this one rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

GAP_TIE = 0.5  # a top-2 logit gap below this is a rounding near-tie, not a real divergence


@dataclass(frozen=True)
class Divergence:
    """Where the other run first left the reference: the token index, each run's token there
    (None past a run's end) and the reference's top-2 logit gap there (None if unknown)."""

    index: int
    reference: int | None
    other: int | None
    gap: float | None

    @property
    def near_tie(self) -> bool:
        return self.gap is not None and self.gap < GAP_TIE

    def __str__(self) -> str:
        gap = "unknown" if self.gap is None else f"{self.gap:.3f}"
        return (f"token {self.index}: the reference has {self.reference}, the other run {self.other}; "
                f"the reference's top-2 logit gap there is {gap} (a near-tie is below {GAP_TIE})")


def first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def divergence(reference: Sequence[int], gaps: Sequence[float], other: Sequence[int]) -> Divergence | None:
    """None when the token sequences are equal; else where they first differ. A run that ends
    where the other goes on differs there too (with the gap if the reference goes on)."""
    if list(reference) == list(other):
        return None
    j = first_difference(reference, other)
    return Divergence(j, reference[j] if j < len(reference) else None, other[j] if j < len(other) else None,
                      gaps[j] if j < len(gaps) and j < len(reference) else None)


def text_divergence(reference: Sequence[int], gaps: Sequence[float], piece: Callable[[int], bytes],
                    other: bytes) -> Divergence | None:
    """`divergence` for a run known only by its text: the first reference token whose bytes the
    other text does not spell at its place."""
    at = 0
    for j, tok in enumerate(reference):
        b = piece(tok)
        if other[at:at + len(b)] != b:
            return Divergence(j, tok, None, gaps[j] if j < len(gaps) else None)
        at += len(b)
    return None if at == len(other) else Divergence(len(reference), None, None, None)


def explained(d: Divergence | None) -> bool:
    """True when the runs agree, or first part at a near-tie of the reference's."""
    return d is None or d.near_tie
