"""Percentiles for the figures the benches and `specfill/stats` report."""

from __future__ import annotations

from collections.abc import Iterable


def pct(values: Iterable[float], q: float) -> float:
    """The q-quantile (0..1) with linear interpolation between ranks; 0.0 for no values."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
