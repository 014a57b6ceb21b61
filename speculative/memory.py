"""Peak resident memory of this process, resettable (Linux /proc), for per-mode figures."""

from __future__ import annotations

from pathlib import Path


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS; False where the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def peak_rss_mb() -> float:
    return _status_kb("VmHWM") / 1024


def rss_mb() -> float:
    return _status_kb("VmRSS") / 1024
