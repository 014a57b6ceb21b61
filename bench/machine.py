"""The machine a bench runs on: the benches print it with their figures (kernels depend on it)."""

from __future__ import annotations

from pathlib import Path


def cpu_flags() -> str:
    """The SIMD flags of this machine's CPU (the kernels depend on them)."""
    try:
        flags = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    return " ".join(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c")) or f in ("sse4_2",))
