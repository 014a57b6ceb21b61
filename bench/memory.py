"""Resident memory of a process (Linux /proc): now, at peak, and a resettable peak."""

from __future__ import annotations

from pathlib import Path


def reset_peak() -> bool:
    """Reset this process's VmHWM to its current RSS; False where the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _status_kb(field: str, pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def peak_rss_mb(pid: int | str = "self") -> float:
    return _status_kb("VmHWM", pid) / 1024


def rss_mb(pid: int | str = "self") -> float:
    return _status_kb("VmRSS", pid) / 1024
